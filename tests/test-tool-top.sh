#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-top -p PID --batch --commands: a client sends exactly 10 reads of
# 4096 bytes, 5 writes of 65536 bytes and 1 read past the end (EINVAL).
# Summed over the intervals it printed, the per-connection rows must
# show 11 reads with 1 error and 5 writes, the per-export rows (export
# "") the same, and the totals at exit: read 11 requests 40960 bytes
# 1 error, write 5 requests 327680 bytes 0 errors.  Latency columns
# must be numbers for both commands.  The server has the cache filter
# with cache-on-read: the 10 reads are of one 64 KiB block, so the
# first misses and the 9 others hit, and the totals per export at exit
# show 9 hits, 1 miss, a hit rate of 90% and no retries for export "".
# EXPECT_READS overrides the expected read count.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh python3
expect_reads="${EXPECT_READS:-11}"

start_server --filter=cache memory 64M cache-on-read=true
out="$tmpdir/out"
start_tool "$out" '^nbdkit-top: attached' \
  python3 "$abs_top_srcdir/tools/nbdkit-top" \
  -p "$server_pid" --batch --commands --delay 0.5 --iterations 200

t nbdsh -u "$uri" -c "$tool_test_io"
# Wait until an interval has shown the closed connection, then stop.
for (( i = 0; i < 100; i++ )); do
  grep -q '^closed connection' "$out" && break
  sleep 0.1
done
kill -TERM "$tool"
wait "$tool" || fail "nbdkit-top exited with status $?"
cat "$out"

# Rows: KIND SERVER CONN PID INFL REQS REQ/s MiB/s ERR P50us P99us
# HIT% RETRY COMMAND EXPORT PEER
sum ()
{
  awk -v kind="$1" -v cmd="$2" -v col="$3" '
    $1 == kind && $14 == cmd { n += $col } END { print n + 0 }' "$out"
}
check () { [ "$2" -eq "$3" ] || fail "$1: expected $3, saw $2"; }
check "conn read requests" "$(sum conn read 6)" "$expect_reads"
check "conn read errors" "$(sum conn read 9)" 1
check "conn write requests" "$(sum conn write 6)" 5
check "conn write errors" "$(sum conn write 9)" 0
check "export read requests" "$(sum export read 6)" "$expect_reads"
check "export write requests" "$(sum export write 6)" 5
awk '$1 == "export" && $15 != "\"\"" { exit 1 }' "$out" ||
  fail "an export row is not for export \"\""
awk '$1 == "conn" && ($2 != '"$server_pid"' || $16 != "unix") { exit 1 }' \
  "$out" || fail "a connection row is not of server $server_pid from unix"
awk '($1 == "conn" || $1 == "export") && $14 != "all" && ($10 !~ /^[0-9]+$/ ||
      $11 !~ /^[0-9]+$/ || $11 < $10) { exit 1 }' "$out" ||
  fail "latency columns are not numbers with p50 <= p99"
# Totals: SERVER CONN COMMAND REQS BYTES ERR
awk -v n="$expect_reads" '
     $3 == "read" && $4 == n && $5 == 40960 && $6 == 1 { ok = 1 }
     END { exit !ok }' "$out" || fail "totals for read"
awk '$3 == "write" && $4 == 5 && $5 == 327680 && $6 == 0 { ok = 1 }
     END { exit !ok }' "$out" || fail "totals for write"
# Cache per export: SERVER HITS MISSES HIT% RETRIES EXPORT
awk -v s="$server_pid" '
     /^cache and retries since attach/ { on = 1; next }
     on && $1 == s && $2 == 9 && $3 == 1 && $4 == 90 && $5 == 0 &&
       $6 == "\"\"" { ok = 1 }
     END { exit !ok }' "$out" ||
  fail "no per-export cache figure of 9 hits, 1 miss (90%) for export \"\""
