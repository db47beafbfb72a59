#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ones plugin: reads give 0xff or the byte= byte, writes, trims and
# zeroes succeed and are forgotten, block status says data (zero data
# for byte=0), nbdcopy copies every byte; size defaults to 0; a bad
# byte= or size is refused at start-up.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy

t "$NBDKIT" -U - ones 1M --run 'nbdsh --base-allocation -u "$uri" -c -' <<'PY'
assert h.get_size() == 1048576
assert not h.is_read_only()
assert h.can_trim() and h.can_zero() and h.can_flush() and h.can_multi_conn()
assert h.pread(65536, 4096) == b"\xff" * 65536
assert h.pread(1, 1048575) == b"\xff"
h.pwrite(b"hello" * 100, 4096, nbd.CMD_FLAG_FUA)
h.trim(8192, 0)
h.zero(8192, 16384)
h.zero(8192, 16384, nbd.CMD_FLAG_FAST_ZERO)
h.flush()
assert h.pread(32768, 0) == b"\xff" * 32768, "a write was kept"
seen = []
def f(meta, off, entries, err):
    seen.extend(entries)
h.block_status(1048576, 0, f)
assert seen == [1048576, 0], seen
PY

t "$NBDKIT" -U - ones size=64K byte=0x55 --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 65536
assert h.pread(65536, 0) == b"\x55" * 65536
PY

# byte=0: zeroes, mapped as data that reads as zero (not a hole).
map=$(t "$NBDKIT" -U - ones 1M byte=0 --run 'nbdinfo --map "$uri"')
[ "$(echo $map)" = "0 1048576 2 zero" ] || fail "byte=0 map: $map"
map=$(t "$NBDKIT" -U - ones 1M byte=7 --run 'nbdinfo --map "$uri"')
[ "$(echo $map)" = "0 1048576 0 data" ] || fail "byte=7 map: $map"

# A copy holds every byte.
t "$NBDKIT" -U - ones 3M byte=0377 --run "nbdcopy \"\$uri\" $tmpdir/out" ||
  fail "nbdcopy from ones"
head -c 3145728 /dev/zero | tr '\0' '\377' | cmp - "$tmpdir/out" ||
  fail "the copy is not 3M of 0xff"

size=$(t "$NBDKIT" -U - ones --run 'nbdinfo --size "$uri"')
[ "$size" = 0 ] || fail "default size: $size"

for bad in 256 -1 0x100 ff ""; do
  refuses "byte" ones 1M byte="$bad" || fail "byte=$bad was not refused"
done
refuses "size" ones size=big || fail "size=big was not refused"
refuses "unknown parameter 'colour'" ones 1M colour=red ||
  fail "an unknown parameter was not refused"
