#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-top without root or bpftrace, from the servers' --metrics
# endpoints.  Everything runs as an ordinary user (nobody, when the test
# is root): servers A (--metrics=unix:PATH) and B (--metrics=unix:NAME,
# relative to the directory it was started in), and three nbdkit-top
# --json --delay 0.5 at once: one given both endpoints (--metrics
# twice), one -p A -p B and one -x (the binary), which must find the
# endpoints from the servers' command lines (and leave out server C,
# started without --metrics).  A's client makes 10 reads of 4096 bytes, 5
# writes of 65536 and 1 read past the end (EINVAL); B's, 2 writes of
# 512.  Summed over the frames, each tool's export and connection rows
# must show exactly those requests and bytes, A's export the one error,
# and p50 <= p99 as numbers; its totals at exit the same per command.
# -p of a server started without --metrics, or of a daemon whose
# --metrics path is relative, says what to do instead; that daemon
# still removes its socket at exit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh setpriv
top="$abs_top_srcdir/tools/nbdkit-top"

as_ordinary_user "$top"

declare -A pid
start_as_user ()    # NAME ARGS...: a server listening on $dir/NAME.nbd
{
  local name="$1"
  shift
  ( cd "$dir" && exec "${as_user[@]}" "$NBDKIT" -f -U "$dir/$name.nbd" \
      "$@" 9>&- ) &
  pid[$name]=$!
  cleanup_fn _kill_pid "${pid[$name]}"
  wait_for 20 -S "$dir/$name.nbd" || fail "server $name did not start"
}
start_as_user A --metrics=unix:"$dir/a.sock" memory 64M
start_as_user B --metrics=unix:b.sock memory 16M
start_as_user C memory 1M
wait_for 5 -S "$dir/b.sock" || fail "no socket b.sock in $dir"

# The server without --metrics: what to do instead.
"${as_user[@]}" /usr/bin/python3 "$top" -p "${pid[C]}" --json -n 1 \
  > "$tmpdir/c.out" 2>&1 && fail "-p of a server without --metrics worked"
cat "$tmpdir/c.out"
grep -q "pid ${pid[C]} was started without --metrics.*give nbdkit-top --metrics" \
  "$tmpdir/c.out" || fail "no clear message for a server without --metrics"

# A daemon with a relative --metrics path: it left the directory the
# path is relative to, so -p cannot know it and says so; the server
# removes its socket at exit all the same.
( cd "$dir" && exec "${as_user[@]}" "$NBDKIT" --metrics=unix:d.sock \
    -U "$dir/d.nbd" -P "$dir/d.pid" memory 1M 9>&- ) ||
  fail "the daemon did not start"
wait_for 20 -s "$dir/d.pid" || fail "the daemon wrote no pid file"
cleanup_fn _kill_pid "$(cat "$dir/d.pid")"
"${as_user[@]}" /usr/bin/python3 "$top" -p "$(cat "$dir/d.pid")" -n 1 \
  > "$tmpdir/d.out" 2>&1 && fail "-p of a daemon with a relative path worked"
cat "$tmpdir/d.out"
grep -q "unix:d.sock is relative to a directory it has left" \
  "$tmpdir/d.out" || fail "no clear message for the daemon's relative path"
_kill_pid "$(cat "$dir/d.pid")"
wait_for 5 ! -e "$dir/d.sock" || fail "the daemon left its metrics socket"

run_top ()          # OUT ARGS...
{
  local out="$1"
  shift
  start_tool "$out" '^\{' "${as_user[@]}" /usr/bin/python3 "$top" "$@" \
    --json --delay 0.5 --iterations 200
  eval "tool_$(basename "$out")=\$tool"
}
run_top "$tmpdir/m" --metrics "unix:$dir/a.sock" --metrics "unix:$dir/b.sock"
run_top "$tmpdir/p" -p "${pid[A]}" -p "${pid[B]}"
run_top "$tmpdir/x" -x "$abs_top_builddir/server/nbdkit"

# Each client stays connected 1.5 s after its requests, so that a
# scrape lists its connection with them all.
t nbdsh -u "nbd+unix:///?socket=$dir/A.nbd" \
  -c "$tool_test_io" -c 'import time; time.sleep(1.5)' &
a=$!
t nbdsh -u "nbd+unix:///?socket=$dir/B.nbd" \
  -c 'for i in range(2): h.pwrite(b"x" * 512, i * 512)' \
  -c 'import time; time.sleep(1.5)' || fail "B's client failed"
wait "$a" || fail "A's client failed"
# Wait until both tools have shown both connections closed, then stop.
for (( i = 0; i < 50; i++ )); do
  [ "$(grep -ho '"reason"' "$tmpdir"/[mpx] | wc -l)" -ge 6 ] && break
  sleep 0.1
done
for x in m p x; do
  eval "tool=\$tool_$x"
  kill -TERM "$tool"
  wait "$tool" || fail "nbdkit-top ($x) exited with status $?"
  cat "$tmpdir/$x.err"
  grep -q '(metrics endpoint)' "$tmpdir/$x.err" ||
    fail "nbdkit-top ($x) did not say it reads the metrics endpoint"
done

for x in m p x; do
  if [ "$x" = m ]; then A="\"unix:$dir/a.sock\""; B="\"unix:$dir/b.sock\""
  else A=${pid[A]}; B=${pid[B]}; fi
  /usr/bin/python3 - "$tmpdir/$x" "$A" "$B" <<'PY' ||
import json, sys
lines = [json.loads (l) for l in open (sys.argv[1]) if l.startswith ("{")]
a, b = (json.loads (x) for x in sys.argv[2:])
frames = [l for l in lines if "rows" in l]
totals = [l for l in lines if "totals" in l]
assert frames and len (totals) == 1, "frames %d, totals %d" % (len (frames), len (totals))
sums = {}
for f in frames:
    for r in f["rows"]:
        assert r["server"] in (a, b), "a row of server %r" % r["server"]
        assert r["export"] == "" and r["command"] == "all", r
        k = (r["kind"], r["server"])
        s = sums.setdefault (k, [0, 0, 0])
        s[0] += r["requests"]
        s[1] += r["bytes"]
        if r["kind"] == "export":
            s[2] += r["errors"]
            if r["requests"]:
                assert 0 <= r["p50_us"] <= r["p99_us"], r
        else:
            assert r["conn"] == 1 and r["peer"] == "unix", r
            assert r["errors"] is None and r["p50_us"] is None, r
want = {("export", a): [16, 10 * 4096 + 5 * 65536, 1],
        ("conn", a): [16, 10 * 4096 + 5 * 65536, 0],
        ("export", b): [2, 1024, 0], ("conn", b): [2, 1024, 0]}
assert sums == want, (sums, want)
t = {(x["server"], x["command"]): (x["requests"], x["bytes"], x["errors"])
     for x in totals[0]["totals"]}
assert t == {(a, "read"): (11, 40960, 1), (a, "write"): (5, 327680, 0),
             (b, "write"): (2, 1024, 0)}, t
closed = sorted ((x["server"], x["conn"]) for f in frames for x in f["closed"])
assert closed == sorted ([(a, 1), (b, 1)]), closed
PY
    { cat "$tmpdir/$x"; fail "nbdkit-top ($x): the JSON does not match what the clients did"; }
done
