#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-top with several servers: -p A -p B --json watches A and
# B and nothing else.  Three servers from the same binary: A gets 3
# reads of 4096 bytes, B 2 writes of 512 bytes, C (not watched) 5
# reads.  The JSON lines (one per refresh, then the totals) must show
# A's reads and B's writes exactly, per connection and in the totals,
# and no row of C; --version prints the server's version.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh python3
top="$abs_top_srcdir/tools/nbdkit-top"

want=$("$NBDKIT" --dump-config | sed -n 's/^server_version=//p')
[ "$(python3 "$top" --version)" = "nbdkit-top $want" ] ||
  fail "nbdkit-top --version does not say $want"

declare -A pid u
for s in A B C; do
  start_server memory 16M
  mv "$sock" "$tmpdir/sock$s"
  pid[$s]=$server_pid
  u[$s]="nbd+unix:///?socket=$tmpdir/sock$s"
done

out="$tmpdir/out"
start_tool "$out" '^\{' \
  python3 "$top" -p "${pid[A]}" -p "${pid[B]}" --json --delay 0.5 \
  --iterations 200
t nbdsh -u "${u[A]}" -c 'for i in range(3): h.pread(4096, i * 4096)'
t nbdsh -u "${u[B]}" -c 'for i in range(2): h.pwrite(b"x" * 512, i * 512)'
t nbdsh -u "${u[C]}" -c 'for i in range(5): h.pread(4096, i * 4096)'
# Wait until a refresh has shown both connections closed, then stop.
for (( i = 0; i < 100; i++ )); do
  [ "$(grep -o '"reason"' "$out" | wc -l)" -ge 2 ] && break
  sleep 0.1
done
kill -TERM "$tool"
wait "$tool" || fail "nbdkit-top exited with status $?"
cat "$out"

python3 - "$out" "${pid[A]}" "${pid[B]}" "${pid[C]}" <<'PY' ||
import json, sys
lines = [json.loads (l) for l in open (sys.argv[1]) if l.startswith ("{")]
a, b, c = (int (x) for x in sys.argv[2:])
frames = [l for l in lines if "rows" in l]
totals = [l for l in lines if "totals" in l]
assert frames and len (totals) == 1, "frames %d, totals %d" % (len (frames), len (totals))
seen = {}
for f in frames:
    for r in f["rows"]:
        assert r["server"] in (a, b), "a row of server %s" % r["server"]
        if r["kind"] == "conn":
            k = (r["server"], r["command"])
            seen[k] = seen.get (k, 0) + r["requests"]
# Not split by command: a connection's row counts all its requests.
assert seen.get ((a, "all")) == 3, seen
assert seen.get ((b, "all")) == 2, seen
t = {(x["server"], x["command"]): x for x in totals[0]["totals"]}
assert set (t) == {(a, "read"), (b, "write")}, t
assert (t[(a, "read")]["requests"], t[(a, "read")]["bytes"]) == (3, 12288), t
assert (t[(b, "write")]["requests"], t[(b, "write")]["bytes"]) == (2, 1024), t
closed = [(x["server"], x["reason"]) for f in frames for x in f["closed"]]
assert sorted (s for s, _ in closed) == sorted ([a, b]), closed
PY
  fail "the JSON output does not match what the clients did"
