#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-snoop.bt (run through tools/nbdkit-trace -p PID) prints
# one line per request: a client sends exactly 10 reads of 4096 bytes,
# 5 writes of 65536 bytes and 1 read past the end (EINVAL); the snoop
# must show exactly those 16 lines for its connection, with their
# offsets, byte counts and errnos, and the disconnect.
# EXPECT_READS overrides the expected read count (to see the test fail).
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
expect_reads="${EXPECT_READS:-10}"

start_server memory 64M
out="$tmpdir/out"
# BEGIN prints the header once every probe is attached.
start_tool "$out" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" snoop

t nbdsh -u "$uri" -c "$tool_test_io" -c 'h.shutdown()'
# The disconnect line is the last one: wait for it, then stop.
for (( i = 0; i < 100; i++ )); do
  grep -q ' disc ' "$out" && break
  sleep 0.1
done
interrupt_tracer "$tool"
cat "$out"

# Columns: TIME CONN COOKIE COMMAND OFFSET BYTES ERRNO LAT REPLY
n_reads="$(awk '$4 == "read" && $7 == "-" && $6 == 4096' "$out" | wc -l)"
n_writes="$(awk '$4 == "write" && $7 == "-" && $6 == 65536' "$out" | wc -l)"
n_einval="$(awk '$4 == "read" && $7 == "EINVAL" && $6 == 0 && $5 == 67108864' \
             "$out" | wc -l)"
n_disc="$(awk '$4 == "disc"' "$out" | wc -l)"
n_all="$(awk '$1 ~ /^[0-9]+$/' "$out" | wc -l)"
[ "$n_reads" -eq "$expect_reads" ] ||
  fail "expected $expect_reads successful reads, saw $n_reads"
[ "$n_writes" -eq 5 ] || fail "expected 5 writes, saw $n_writes"
[ "$n_einval" -eq 1 ] || fail "expected 1 EINVAL read, saw $n_einval"
[ "$n_disc" -eq 1 ] || fail "expected 1 disconnect, saw $n_disc"
[ "$n_all" -eq 17 ] || fail "expected 17 lines, saw $n_all"
# The reads were at 0, 4096, ... 36864.  (Lines come in reply_send
# order, which is wire order: a client may already have sent its next
# request, so neighbours can swap.)
offs="$(awk '$4 == "read" && $7 == "-" { print $5 }' "$out" | sort -n |
        tr '\n' ' ')"
[ "$offs" = "0 4096 8192 12288 16384 20480 24576 28672 32768 36864 " ] ||
  fail "read offsets: $offs"
# One connection id throughout.
[ "$(awk '$1 ~ /^[0-9]+$/ { print $2 }' "$out" | sort -u | wc -l)" -eq 1 ] ||
  fail "more than one connection id"
