#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cache filter's probes fire under bpftrace with the right
# arguments: a read of an uncached block misses (cache_miss offset,
# count) and with cache-on-read fills the block (cache_fill offset,
# count, blocknum); reading it again hits; flush reports the dirty
# blocks it wrote back (cache_flush blocks, bytes); and writing past
# cache-max-size evicts (cache_evict offset, count, blocknum, dirty)
# until the cache is under the low threshold, writing dirty blocks back
# first, so the file has every byte written.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh readelf
tracing_lock

so="$(filter_so cache)"
for p in cache_hit cache_miss cache_fill cache_evict cache_flush; do
  readelf -n "$so" | grep -q "Name: $p\$" || fail "no probe $p in $so"
done

disk="$tmpdir/disk.img"
truncate -s 8M "$disk"
# A 1M cache of 64K blocks: eviction starts when 16 blocks are cached
# (over 99% of 1M) and stops at 3 (under 20%).
start_server --filter=cache file "$disk" cache-on-read=true \
  cache-max-size=1M cache-high-threshold=99 cache-low-threshold=20
out="$tmpdir/trace"
trace_start "$out" "
usdt:$so:nbdkit:cache_hit /arg0 != 0 && arg1 != 0/ { printf(\"hit %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:cache_miss /arg0 != 0 && arg1 != 0/ { printf(\"miss %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:cache_fill /arg0 != 0 && arg1 != 0/ { printf(\"fill %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:cache_evict /arg0 != 0 && arg1 != 0/ { printf(\"evict %d %d %d %d\\n\", arg2, arg3, arg4, arg5); }
usdt:$so:nbdkit:cache_flush /arg0 != 0 && arg1 != 0/ { printf(\"flush %d %d\\n\", arg2, arg3); }
"
t nbdsh -u "$uri" -c '
h.pread(100, 65536 * 5 + 10)       # miss, fill block 5
h.pread(100, 65536 * 5 + 20)       # hit
h.pwrite(b"x" * 65536, 65536 * 7)  # block 7 dirty
h.pwrite(b"y" * 1000, 65536 * 8)   # block 8 dirty (filled first)
h.flush()                          # 2 blocks written back
for i in range(20):                # blocks 16..35 dirty: evictions
    h.pwrite(bytes([i + 1]) * 65536, 65536 * (16 + i))
'
trace_stop
cat "$out"
expect ()
{
  grep -qx "$1" "$out" || fail "no line '$1' in the trace"
}
expect "miss 327690 100"
expect "fill 327680 65536 5"
expect "hit 327700 100"
expect "fill 524288 65536 8"
expect "flush 2 131072"
# The 16th block cached is block 28 (5, 7, 8, then 16..28).  Every
# block was used since the hand started, so the sweep's first turn only
# clears their marks, and its second evicts from the start: the clean
# blocks 5, 7, 8, then the dirty 16..25 (written back first), leaving
# 3.  Blocks 29..35 then bring the cache to 10: no more eviction.
expect "evict 327680 65536 5 0"
expect "evict 458752 65536 7 0"
expect "evict 524288 65536 8 0"
for b in $(seq 16 25); do
  expect "evict $((b * 65536)) 65536 $b 1"
done
n="$(grep -c '^evict' "$out")"
[ "$n" -eq 13 ] || fail "$n evictions, expected 13"
stop_server

# No write was lost: every block written is in the file.
t /usr/bin/python3 - "$disk" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
assert d[65536 * 7:65536 * 8] == b"x" * 65536
assert d[65536 * 8:65536 * 8 + 1000] == b"y" * 1000
for i in range(20):
    off = 65536 * (16 + i)
    # Blocks still cached at exit were never flushed (no flush after):
    # only evicted ones must be there, and those are checked below.
    blk = d[off:off + 65536]
    assert blk in (bytes([i + 1]) * 65536, bytes(65536)), i
PY
evicted_dirty="$(awk '$1 == "evict" && $5 == 1 && $4 >= 16 { print $4 }' "$out")"
for b in $evicted_dirty; do
  i=$((b - 16))
  got="$(od -An -tu1 -j $((b * 65536)) -N 1 "$disk" | tr -d ' ')"
  [ "$got" -eq $((i + 1)) ] ||
    fail "evicted dirty block $b is not in the file (got $got)"
done
