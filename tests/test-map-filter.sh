#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=map serves each map=START-END:DEST range from DEST of the
# plugin, the first parameter winning where ranges overlap and the rest
# of the disk where it was: what clients read equals the same bytes put
# together with dd, writes land where the map says in the file, block
# status follows the map, bytes mapped past the plugin's end (a DEST
# too far, or map-size beyond it) fail with EIO, and bad parameters
# stop the server with an error naming them.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh dd cmp

disk="$tmpdir/disk.img"
# 1 MiB of bytes that differ at every 512-byte sector.
python3 -c '
import sys
sys.stdout.buffer.write(b"".join(
    (b"%08d" % i) * 64 for i in range(2048)))' > "$disk"
[ "$(stat -c %s "$disk")" -eq 1048576 ] || fail "disk is not 1 MiB"

# expect_bytes NAME MAP-ARGS... -- DD-PIECES...: the export through the
# map equals the file built from the identity copy overwritten by each
# piece "START:LEN:SRC" (dd from SRC of the disk to START).
expect_bytes ()
{
  local name="$1" args=() piece start len src
  shift
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  cp "$disk" "$tmpdir/ref"
  for piece in "$@"; do
    IFS=: read -r start len src <<< "$piece"
    dd if="$disk" of="$tmpdir/ref" bs=1 skip="$src" seek="$start" \
      count="$len" conv=notrunc status=none
  done
  rm -f "$tmpdir/got"
  t "$NBDKIT" -U - --filter=map file "$disk" "${args[@]}" \
    --run "nbdcopy \"\$uri\" $tmpdir/got" || fail "$name: server or nbdcopy"
  cmp "$tmpdir/ref" "$tmpdir/got" || fail "$name: bytes differ from dd's"
  echo "$name: same bytes as dd"
}

# The page's example: swap the first two sectors.
expect_bytes swap map=0-511:512 map=512-1023:0 -- 0:512:512 512:512:0
# Overlapping: the first given wins; the second keeps what is left
# (1000-1999 from 700000, then 3000-3999 from 702000).
expect_bytes overlap map=2000-2999:5000 map=1000-3999:700000 -- \
  1000:1000:700000 2000:1000:5000 3000:1000:702000
# Out of order, adjacent, ranges inside others (shadowed), sizes with
# suffixes, one byte, the last byte of the disk.
expect_bytes many map=512k-1048575:0 map=0-4095:1044480 map=100-199:300 \
  map=4096-4096:7 map=1048575-1048575:9 map=8192-8199:512k -- \
  524288:524288:0 0:4096:1044480 4096:1:7 8192:8:524288
# Identical ranges: the later one changes nothing.
expect_bytes dup map=10-19:30 map=10-19:60 -- 10:10:30

# --- Writes, zero and trim go where the map says ---------------------------
cp "$disk" "$tmpdir/w.img"
cp "$disk" "$tmpdir/w.ref"
t "$NBDKIT" -U - --filter=map file "$tmpdir/w.img" \
  map=0-4095:8192 map=4096-8191:0 --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"A\" * 6000, 1000)
h.zero(1000, 7000)
assert h.pread(6000, 1000) == b\"A\" * 6000
assert h.pread(1000, 7000) == bytes(1000)
"' || fail "writes through the map"
# 1000-4095 -> 9192-12287, 4096-6999 -> 0-2903; then zero 7000-7999 -> 2904-3903.
printf 'A%.0s' $(seq 3096) | dd of="$tmpdir/w.ref" bs=1 seek=9192 \
  conv=notrunc status=none
printf 'A%.0s' $(seq 2904) | dd of="$tmpdir/w.ref" bs=1 seek=0 \
  conv=notrunc status=none
dd if=/dev/zero of="$tmpdir/w.ref" bs=1 seek=2904 count=1000 \
  conv=notrunc status=none
cmp "$tmpdir/w.ref" "$tmpdir/w.img" || fail "writes landed in the wrong place"
echo "writes: where the map says"

# --- Block status follows the map ------------------------------------------
# memory plugin: only 64k-128k written, so data there, a hole elsewhere.
# Mapping 0-64k-1 to 64k shows data at the start, and the identity
# range 64k-128k is still data.
t "$NBDKIT" -U - --filter=map memory 1M map=0-65535:65536 \
  map=131072-196607:0 --run 'nbdsh --base-allocation -u "$uri" -c "
h.pwrite(b\"x\" * 65536, 65536)
got = []
def f(ctx, off, entries, err):
    for i in range(0, len(entries), 2):
        got.append((entries[i], entries[i + 1] & 1))
pos = 0
while pos < 262144:
    got.clear()
    h.block_status(262144 - pos, pos, f)
    start = pos
    for length, hole in got:
        print(start, length, \"hole\" if hole else \"data\")
        if start < 65536:
            assert not hole, (start, \"maps to written data\")
        elif start < 131072:
            assert not hole, (start, \"identity over written data\")
        elif start < 196608:
            assert hole, (start, \"maps to 0, never written\")
        start += length
    pos = start
" && nbdsh -u "$uri" -c "
assert h.pread(4, 0) == h.pread(4, 65536) == b\"xxxx\"
# Cache and trim go through the map too: trimming 0-64k empties 64k-128k
# below, which the identity range shows.
h.cache(65536, 0)
h.trim(65536, 0)
assert h.pread(65536, 65536) == bytes(65536)
"' || fail "block status, cache and trim through the map"
echo "block status, cache, trim: follow the map"

# --- Past the plugin's end: EIO ----------------------------------------------
t "$NBDKIT" -U - --filter=map file "$disk" map=0-1023:1048000 \
  map-size=2M map=1M-2097151:0 --run 'nbdsh -u "$uri" -c "
import errno
assert h.get_size() == 2 * 1024 * 1024
def eio(off, n):
    try:
        h.pread(n, off)
        raise AssertionError(\"read at %d succeeded\" % off)
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e
eio(0, 1024)        # 1048000 + 1024 is past the 1 MiB file
eio(1000, 100)      # the same, from inside the range
assert h.pread(500, 1024) == h.pread(500, 1024 + 1048576)
assert h.pread(4096, 2 * 1024 * 1024 - 4096) == h.pread(4096, 1048576 - 4096)
"' 2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "past the end"; }
grep -q 'map: bytes 0-1023 map to 1048000-1049023, past the end' \
  "$tmpdir/err" || { cat "$tmpdir/err"; fail "no past-the-end error"; }
# map-size past the plugin with nothing mapped there.
t "$NBDKIT" -U - --filter=map file "$disk" map-size=2M --run 'nbdsh -u "$uri" -c "
import errno
try:
    h.pread(512, 1048576)
    raise AssertionError(\"read past the plugin succeeded\")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
"' 2> /dev/null || fail "map-size past the plugin"
echo "past the end: EIO"

# --- Bad parameters ----------------------------------------------------------
refuses 'map=1000: expected START-END:DEST' --filter=map file "$disk" map=1000
refuses 'map=1-2: expected START-END:DEST' --filter=map file "$disk" map=1-2
refuses 'map=-2:3: expected START-END:DEST' --filter=map file "$disk" map=-2:3
refuses 'map=1-:3: expected START-END:DEST' --filter=map file "$disk" map=1-:3
refuses 'map=5-2:0: END is before START' --filter=map file "$disk" map=5-2:0
refuses 'could not parse|parse.*size|invalid' --filter=map file "$disk" \
  map=1x-2:0
refuses 'map=0-9223372036854775807:0: the range is too large' \
  --filter=map file "$disk" map=0-9223372036854775807:0
refuses 'map=0-10:9223372036854775800: the range is too large' \
  --filter=map file "$disk" map=0-10:9223372036854775800
echo "bad parameters: refused"
