#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-trace -p PID filters: the live view of the caching
# filters' decisions.  Over cow above cache above memory, a client
# writes one 64 KiB block (a whole cow block: no copy-up), reads it 10
# times (from cow's overlay), then reads 5 times a block it never wrote
# (through cow, and through cache to the plugin: cache-on-read is off,
# so each is a cache miss).  The per-interval lines name both filters,
# and the totals printed at ^C hold exactly those counts.  A server
# with no caching filter is refused with a clear message.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh readelf
requires_root
tracing_lock

trace="$abs_top_srcdir/tools/nbdkit-trace"
start_server --filter=cow --filter=cache memory 64M
out="$tmpdir/out"
start_tool "$out" '^Filter decisions' "$trace" -p "$server_pid" filters 1

t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 65536, 0)
for i in range(10):
    assert h.pread(4096, 0) == b"x" * 4096
for i in range(5):
    assert h.pread(4096, 1 << 20) == bytes(4096)
' || fail "client failed"
sleep 1.5
interrupt_tracer "$tool"
cat "$out" "$out.err"

grep -Eq '^cow: +read_overlay [0-9]+ read_through [0-9]+ copy_up [0-9]+' "$out" ||
  fail "no per-interval cow line"
grep -Eq '^cache: +hit [0-9]+ miss [0-9]+ fill [0-9]+ evict [0-9]+' "$out" ||
  fail "no per-interval cache line"
grep -Eq '\(66% read_overlay\)' "$out" ||
  fail "no cow hit rate of 10 in 15"
total ()
{
  awk -v k="@total_$1:" '$1 == k { print $2 }' "$out"
}
[ "$(total cow_read_overlay)" = 10 ] || fail "cow overlay reads: $(total cow_read_overlay), expected 10"
[ "$(total cow_read_through)" = 5 ] || fail "cow reads through: $(total cow_read_through), expected 5"
[ -z "$(total cow_copy_up)" ] || fail "a whole-block write copied up"
[ "$(total cache_miss)" = 5 ] || fail "cache misses: $(total cache_miss), expected 5"
[ -z "$(total cache_hit)" ] || fail "cache hits without cache-on-read"
stop_server

# No caching filter: a clear refusal.
start_server memory 1M
status=0
t "$trace" -p "$server_pid" filters > "$tmpdir/none" 2>&1 || status=$?
cat "$tmpdir/none"
[ "$status" -eq 1 ] && grep -q 'has no caching filter with probes loaded' "$tmpdir/none" ||
  fail "expected a refusal without caching filters (status $status)"
