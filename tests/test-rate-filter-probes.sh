#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rate filter's rate_wait probe fires when a request waits, naming
# the bucket ("total" or "connection"), the nanoseconds and the bytes.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$(filter_so rate)"
# 8 Mibit/s total (1 MiB/s), 4 Mibit/s per connection (512 KiB/s).
start_server --filter=rate memory 1M rate=8M connection-rate=4M
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:rate_wait /arg0 > 0 && arg1 > 0/ {
  printf(\"wait %s %d %d\\n\", str(arg2), arg3, arg4);
}"
t nbdsh -u "$uri" -c 'h.pread(65536, 0); h.pwrite(b"x" * 32768, 0)'
sleep 0.5
trace_stop
cat "$out"
# Empty buckets: 64 KiB waits 62.5 ms on the total and 125 ms on the
# connection bucket; 32 KiB of writes half as long.
check ()
{
  local bucket="$1" bytes="$2" ms="$3"
  awk -v b="$bucket" -v n="$bytes" -v ms="$ms" '
    $1 == "wait" && $2 == b && $4 == n &&
    $3 >= ms * 900000 && $3 <= ms * 1000000 { found = 1 }
    END { exit !found }' "$out" ||
    fail "no rate_wait $bucket for $bytes bytes of about $ms ms"
}
check total 65536 62.5
check connection 65536 125
check total 32768 31.25
check connection 32768 62.5
[ "$(grep -c '^wait' "$out")" -eq 4 ] || fail "expected 4 rate_wait"
