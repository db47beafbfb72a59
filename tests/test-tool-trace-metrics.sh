#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit-trace's latency view without root, from the --metrics
# endpoint: as an ordinary user (nobody, when the test is root), server
# A has --metrics and slow reads (the delay filter, rdelay=20ms) and
# fast writes.  Two `nbdkit-trace ... latency 3 --json' started before
# the client (and after an earlier client's read and write), one given
# the endpoint (--metrics unix:PATH), one -p PID
# (the endpoint found from A's command line), must both show exactly
# its 4 reads and 3 writes, nothing else, the reads all in the bucket
# (2^-6 s, 2^-5 s] = (15.6 ms, 31.25 ms] and their p50 and p99 in it.
# As root with bpftrace, the probe view with -p twice (servers B and
# C, attached by binary path with a pid predicate) counts the requests
# of both and none of server D's.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh setpriv
trace="$abs_top_srcdir/tools/nbdkit-trace"

as_ordinary_user "$trace"

declare -A pid
start_named ()      # NAME [as_user] ARGS...: a server on $dir/NAME.nbd
{
  local name="$1" who=()
  shift
  [ "$1" != as_user ] || { who=("${as_user[@]}"); shift; }
  "${who[@]}" "$NBDKIT" -f -U "$dir/$name.nbd" "$@" 9>&- &
  pid[$name]=$!
  cleanup_fn _kill_pid "${pid[$name]}"
  wait_for 20 -S "$dir/$name.nbd" || fail "server $name did not start"
}
start_named A as_user --metrics=unix:"$dir/a.sock" --filter=delay \
  memory 1M rdelay=20ms
# Before the interval: not counted.
t nbdsh -u "nbd+unix:///?socket=$dir/A.nbd" -c 'h.pread(512, 0)' \
  -c 'h.pwrite(b"x" * 512, 0)' || fail "A's first client failed"

for x in m p; do
  case $x in
    m) who=(--metrics "unix:$dir/a.sock") ;;
    p) who=(-p "${pid[A]}") ;;
  esac
  # PATH: the tool's python3, not the one first on the test's PATH.
  PATH=/usr/bin:$PATH timeout -k 30 30 "${as_user[@]}" "$trace" \
    "${who[@]}" latency 3 --json > "$tmpdir/$x" 2> "$tmpdir/$x.err" &
  eval "tool_$x=\$!"
  cleanup_fn _kill_pid "$!"
  wait_for_output "$tmpdir/$x.err" '^Reading' "$!" ||
    { cat "$tmpdir/$x.err"; fail "nbdkit-trace ($x) did not start"; }
done
t nbdsh -u "nbd+unix:///?socket=$dir/A.nbd" \
  -c 'for i in range(4): h.pread(512, i * 512)' \
  -c 'for i in range(3): h.pwrite(b"x" * 512, i * 512)' ||
  fail "A's client failed"
for x in m p; do
  eval "wait \$tool_$x" || { cat "$tmpdir/$x.err"; fail "nbdkit-trace ($x) failed"; }
  cat "$tmpdir/$x.err" "$tmpdir/$x"
  /usr/bin/python3 - "$tmpdir/$x" <<'PY' ||
import json, sys
j = json.load (open (sys.argv[1]))
assert j["source"] == "metrics endpoint", j
rows = {r["command"]: r for r in j["latency"]}
assert sorted (rows) == ["read", "write"], rows
assert all (r["export"] == "" for r in rows.values ())
r, w = rows["read"], rows["write"]
assert (r["requests"], r["errors"]) == (4, 0), r
assert (w["requests"], w["errors"]) == (3, 0), w
assert r["buckets"] == [{"lo_s": 2 ** -6, "le_s": 2 ** -5, "count": 4}], r
assert 2 ** -6 * 1e6 <= r["p50_us"] <= r["p99_us"] <= 2 ** -5 * 1e6, r
assert sum (b["count"] for b in w["buckets"]) == 3, w
PY
    fail "nbdkit-trace ($x): the JSON does not match what the client did"
done
grep -q "^Reading .* unix:$dir/a.sock" "$tmpdir/m.err" ||
  fail "--metrics: the banner does not name the endpoint"
grep -q "^Reading .* pid ${pid[A]}" "$tmpdir/p.err" ||
  fail "-p: the banner does not name the server"

# The probe view of several servers.
[ "$(id -u)" -eq 0 ] && command -v bpftrace >/dev/null || exit 0
requires_tracer
start_named B memory 1M
start_named C memory 1M
start_named D memory 1M
start_tool "$tmpdir/bt" '^Tracing' "$trace" -p "${pid[B]}" -p "${pid[C]}" \
  latency
t nbdsh -u "nbd+unix:///?socket=$dir/B.nbd" -c 'for i in range(2): h.pread(512, 0)'
t nbdsh -u "nbd+unix:///?socket=$dir/C.nbd" -c 'for i in range(3): h.pwrite(b"x" * 512, 0)'
t nbdsh -u "nbd+unix:///?socket=$dir/D.nbd" -c 'for i in range(5): h.pread(512, 0)' \
  -c 'h.flush()'
sleep 0.5
interrupt_tracer "$tool"
cat "$tmpdir/bt" "$tmpdir/bt.err"
[ "$(grep -c '^@requests\[' "$tmpdir/bt")" -eq 2 ] &&
  grep -q '^@requests\[read\]: 2$' "$tmpdir/bt" &&
  grep -q '^@requests\[write\]: 3$' "$tmpdir/bt" ||
  fail "-p twice: not exactly B's 2 reads and C's 3 writes"
