#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# One connection has many requests in flight in a plugin that completes
# them later (nbdkit-async(3)), on few of the server's threads:
#  - 64 reads of 100 ms each, sent together, all finish within 1.5 s
#    (one at a time they take 6.4 s; the thread pool alone, -t 4,
#    1.6 s), while the server has at most 8 threads;
#  - with max-in-flight=8 the server stops reading at 8: the same 64
#    reads take at least 8 rounds of 100 ms.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
# Timing against a 100 ms backend: a busy machine should not decide it.
tracing_lock

start_server -t 4 example-async size=1M delay=100
out=$(t python3 "$srcdir/read-burst.py" "$sock" "$server_pid" 64) ||
  fail "the reads failed: $out"
echo "$out"
read -r _ el _ most _ <<< "$out"
awk -v e="$el" 'BEGIN { exit !(e >= 0.1 && e < 1.5) }' ||
  fail "64 reads of 100 ms took $el s: they did not overlap"
[ "$most" -le 8 ] || fail "the server had $most threads"
stop_server

start_server -t 4 example-async size=1M delay=100 max-in-flight=8
out=$(t python3 "$srcdir/read-burst.py" "$sock" "$server_pid" 64) ||
  fail "the reads failed: $out"
echo "$out"
read -r _ el _ <<< "$out"
awk -v e="$el" 'BEGIN { exit !(e >= 0.79) }' ||
  fail "64 reads of 100 ms, 8 in flight at most, took $el s"
