#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-slow.bt (through tools/nbdkit-trace -p PID): two tracers
# on one server, threshold 0 us and threshold 100 s.  A client sends
# exactly 10 reads and 5 writes: the first tracer must print exactly
# those 15 requests (with sane stage times: queue + layer + send <=
# total), the second none.
# EXPECT_SLOW overrides the expected count at threshold 0.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
expect="${EXPECT_SLOW:-15}"

start_server memory 64M
pids=()
for th in 0 100000000; do
  timeout -k 120 120 "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" \
    slow "$th" > "$tmpdir/out$th" 2> "$tmpdir/err$th" &
  pids+=($!)
  cleanup_fn _kill_pid "$!"
done
for j in 0 1; do
  th=$(( j ? 100000000 : 0 ))
  wait_for_output "$tmpdir/out$th" '^TIME' "${pids[$j]}" ||
    { cat "$tmpdir/out$th" "$tmpdir/err$th"; fail "slow $th did not start"; }
done

t nbdsh -u "$uri" -c '
for i in range(10):
    h.pread(4096, i * 4096)
for i in range(5):
    h.pwrite(b"w" * 65536, 1048576 + i * 65536)
'
sleep 0.5
for p in "${pids[@]}"; do interrupt_tracer "$p"; done
cat "$tmpdir/out0" "$tmpdir/out100000000"

# Columns: TIME CONN COMMAND OFFSET BYTES ERR QUEUE LAYER SEND TOTAL
rows0="$(awk '$1 ~ /^[0-9]+$/' "$tmpdir/out0" | wc -l)"
[ "$rows0" -eq "$expect" ] || fail "threshold 0: expected $expect, saw $rows0"
[ "$(awk '$1 ~ /^[0-9]+$/ && $3 == "read" && $5 == 4096' "$tmpdir/out0" |
     wc -l)" -eq 10 ] || fail "threshold 0: not 10 reads of 4096"
[ "$(awk '$1 ~ /^[0-9]+$/ && $3 == "write" && $5 == 65536' "$tmpdir/out0" |
     wc -l)" -eq 5 ] || fail "threshold 0: not 5 writes of 65536"
awk '$1 ~ /^[0-9]+$/ && $7 + $8 + $9 > $10 + 2 { bad = 1 } END { exit bad }' \
  "$tmpdir/out0" || fail "stage times exceed the total"
rows1="$(awk '$1 ~ /^[0-9]+$/' "$tmpdir/out100000000" | wc -l)"
[ "$rows1" -eq 0 ] || fail "threshold 100s: expected 0, saw $rows1"
grep -q '^@slow\[read\]: 10$' "$tmpdir/out0" || fail "no @slow[read]: 10"
