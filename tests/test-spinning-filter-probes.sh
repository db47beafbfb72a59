#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The spinning filter's spinning_seek probe: one per move longer than a
# track, with the head, where it was, where it went and the delay from
# the seek curve (whole disk: max-seek-time; half: half-seek-time).
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so spinning)"
start_server --filter=spinning memory 64M min-seek-time=10ms \
  half-seek-time=100ms max-seek-time=200ms
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:spinning_seek /arg0 > 0 && arg1 > 0/ {
  printf(\"seek %d %d %d %d\\n\", arg2, arg3, arg4, arg5);
}"
t nbdsh -u "$uri" -c - <<'PY'
M = 1 << 20
h.pread(4096, 0)                 # the head is there already
h.pread(4096, 64 * M - 4096)     # across the disk
h.pread(4096, 32 * M)            # back half way
h.pread(4096, 32 * M + 4096)     # the next block
PY
sleep 0.5
trace_stop
cat "$out"
grep '^seek' "$out" > "$tmpdir/got"
[ "$(wc -l < "$tmpdir/got")" -eq 2 ] || fail "wanted 2 seeks"
read -r _ head from to ns < <(sed -n 1p "$tmpdir/got")
[ "$head $from $to" = "0 4096 67104768" ] || fail "first seek: $head $from $to"
[ "$ns" -gt 199000000 ] && [ "$ns" -le 200000000 ] || fail "first delay $ns"
read -r _ head from to ns < <(sed -n 2p "$tmpdir/got")
[ "$head $from $to" = "0 67108863 33554432" ] ||
  fail "second seek: $head $from $to"
[ "$ns" -gt 99000000 ] && [ "$ns" -lt 101000000 ] || fail "second delay $ns"
