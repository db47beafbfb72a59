#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=bzip2 serves what bzip2 -d gives, read-only: nbdcopy's and
# qemu-img's copies and random nbdsh reads match the original, several
# streams and trailing bytes are handled as bzip2 -d does, writes, trims
# and zeroes fail with EPERM/EROFS, and bad input (not bzip2, empty,
# truncated, corrupt, over bzip2-max-size) refuses the connection with
# a clear error while the server lives on.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_cmd bzip2 nbdsh nbdcopy nbdinfo qemu-img

raw="$tmpdir/disk.raw"
# A multiple of 512: qemu rounds an export's size up to a sector.
make_sample "$raw" $(( 3 * 1024 * 1024 + 4608 )) 1
bzip2 -c -9 "$raw" > "$tmpdir/disk.bz2"

# --- Bytes: nbdcopy, qemu-img, random reads, refused writes ----------------
start_server --filter=bzip2 file "$tmpdir/disk.bz2"
t nbdcopy --connections=4 "$uri" "$tmpdir/copy"
cmp "$raw" "$tmpdir/copy" || fail "nbdcopy's copy differs from the original"
t qemu-img convert -f raw -O raw "$uri" "$tmpdir/qcopy"
cmp "$raw" "$tmpdir/qcopy" || fail "qemu-img's copy differs"
reads_match "$uri" "$raw"
stop_server

# --- Several streams, trailing bytes, an empty stream ----------------------
make_sample "$tmpdir/part2" 150000 2
bzip2 -c "$tmpdir/part2" > "$tmpdir/part2.bz2"
: | bzip2 -c > "$tmpdir/empty.bz2"
cat "$tmpdir/disk.bz2" "$tmpdir/empty.bz2" "$tmpdir/part2.bz2" \
  > "$tmpdir/multi.bz2"
bzip2 -dc "$tmpdir/multi.bz2" > "$tmpdir/multi.expected"
t "$NBDKIT" -U - --filter=bzip2 file "$tmpdir/multi.bz2" \
  --run "nbdcopy \"\$uri\" $tmpdir/multi.got"
cmp "$tmpdir/multi.expected" "$tmpdir/multi.got" ||
  fail "several streams: not what bzip2 -d gives"
{ cat "$tmpdir/part2.bz2"; printf 'trailing junk\0\0'; } > "$tmpdir/junk.bz2"
t "$NBDKIT" -U - --filter=bzip2 file "$tmpdir/junk.bz2" \
  --run "nbdcopy \"\$uri\" $tmpdir/junk.got"
cmp "$tmpdir/part2" "$tmpdir/junk.got" || fail "trailing bytes changed the data"
size=$(t "$NBDKIT" -U - --filter=bzip2 file "$tmpdir/empty.bz2" \
         --run 'nbdinfo --size "$uri"')
[ "$size" = 0 ] || fail "an empty stream: size $size"

# --- Bad input -------------------------------------------------------------
csize=$(stat -c %s "$tmpdir/disk.bz2")
bad_input 'bzip2\[1\]: error: not bzip2 data' --filter=bzip2 file "$raw"
: > "$tmpdir/zero-length"
bad_input 'ends before the end of the bzip2 stream' \
  --filter=bzip2 file "$tmpdir/zero-length"
for n in 3 100 $(( csize / 2 )) $(( csize - 1 )); do
  head -c "$n" "$tmpdir/disk.bz2" > "$tmpdir/trunc.bz2"
  bad_input 'bzip2\[1\]: error: .*(ends before the end|corrupt)' \
    --filter=bzip2 file "$tmpdir/trunc.bz2"
done
cp "$tmpdir/disk.bz2" "$tmpdir/corrupt.bz2"
printf '\x55\xaa\x55\xaa' |
  dd of="$tmpdir/corrupt.bz2" bs=1 seek=$(( csize / 2 )) conv=notrunc status=none
bad_input 'bzip2\[1\]: error: the bzip2 data is corrupt' \
  --filter=bzip2 file "$tmpdir/corrupt.bz2"
rawsize=$(stat -c %s "$raw")
bad_input 'larger than bzip2-max-size=' \
  --filter=bzip2 file "$tmpdir/disk.bz2" bzip2-max-size=$(( rawsize - 1 ))
size=$(t "$NBDKIT" -U - --filter=bzip2 file "$tmpdir/disk.bz2" \
         bzip2-max-size=$rawsize --run 'nbdinfo --size "$uri"')
[ "$size" = "$rawsize" ] || fail "bzip2-max-size=$rawsize: size $size"
TMPDIR="$tmpdir/no-such-dir" bad_input \
  'cannot create a temporary file in .*/no-such-dir' \
  --filter=bzip2 file "$tmpdir/disk.bz2"
refuses 'bzip2: error: bzip2-max-size: could not parse size' \
  --filter=bzip2 file "$tmpdir/disk.bz2" bzip2-max-size=lots ||
  fail "bzip2-max-size=lots"

# A failed decompression is not remembered: once the file is whole, the
# next connection to the same server gets the content.
head -c $(( csize / 2 )) "$tmpdir/disk.bz2" > "$tmpdir/later.bz2"
start_server --filter=bzip2 file "$tmpdir/later.bz2"
expect_fail t nbdinfo --size "$uri" 2>/dev/null || fail "a truncated file was served"
cp "$tmpdir/disk.bz2" "$tmpdir/later.bz2"
t nbdcopy "$uri" "$tmpdir/later.got"
cmp "$raw" "$tmpdir/later.got" || fail "retry after a failed decompression"
stop_server
