#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The floppy plugin: a tree with long, Unicode, clashing and 8.3 names,
# nested and empty directories, empty, odd-sized and bigger files and
# things that are left out (symlink, fifo) becomes a disk whose
# partition fsck.fat finds clean, whose files mtools lists and copies
# back byte for byte, whose map's holes really are zero, that several
# connections read in parallel, and whose file bytes are read from the
# files on demand.  (Debian's nbdkit lays the disk out differently and
# its small images fail fsck.fat and mtools, so this checks the right
# answers rather than comparing bytes with it.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy mdir mcopy fsck.fat python3 sha256sum
export LANG=C.UTF-8 LC_ALL=C.UTF-8
export MTOOLS_SKIP_CHECK=1

src="$tmpdir/src"
mkdir -p "$src/sub/deeper/deepest" "$src/empty dir" "$src/many"
echo "hello" > "$src/README.TXT"
echo "lower case" > "$src/hello.txt"
: > "$src/empty file"
head -c 4096 /dev/urandom > "$src/exactly one cluster.bin"
head -c 1000001 /dev/urandom > "$src/sub/big file with spaces.data"
echo "café" > "$src/sub/café ñandú.txt"
echo "smile" > "$src/sub/😀 emoji.txt"
echo "dots" > "$src/a.b.c.d.e"
echo "hidden" > "$src/.hidden"
echo "deep" > "$src/sub/deeper/deepest/leaf"
long="$(printf 'x%.0s' {1..200}).txt"
echo "long" > "$src/sub/$long"
# Names whose short forms clash: LONGFI~1 ... and beyond ~9.
for i in $(seq 1 12); do echo "$i" > "$src/many/longfilename $i.txt"; done
# Enough names to need several directory clusters.
for i in $(seq 1 300); do echo "$i" > "$src/many/file number $i"; done
ln -s README.TXT "$src/a symlink"
mkfifo "$src/a fifo"

start_server floppy "$src"
img="$tmpdir/disk.img"
t nbdcopy --connections=4 --requests=16 "$uri" "$img"
t nbdcopy --no-extents "$uri" "$tmpdir/disk-all.img"
cmp "$img" "$tmpdir/disk-all.img" ||
  fail "copy skipping holes differs from a full copy: a hole is not zero"
t nbdinfo --json "$uri" > "$tmpdir/info.json"
python3 - "$tmpdir/info.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
assert e["is_read_only"], e
assert e["can_multi_conn"], e
assert "ID=0xc" in e["content"] and "startsector 2048" in e["content"], e
PY

# The file system: clean for fsck.fat.
part="$tmpdir/part.img"
dd if="$img" of="$part" bs=1M skip=1 status=none
fsck.fat -n -v "$part" > "$tmpdir/fsck" 2>&1 ||
  fail "fsck.fat: $(cat "$tmpdir/fsck")"
grep -q 'NBDKITFLOPY' "$tmpdir/fsck" || grep -q 'NBDKITFLOPY' "$img" ||
  fail "no label"
! grep -qi 'fixing\|invalid\|warning' "$tmpdir/fsck" ||
  fail "fsck.fat complained: $(cat "$tmpdir/fsck")"

# mtools reads the tree back, names and bytes.
t mdir -i "$img@@1M" -/ -a :: > "$tmpdir/mdir"
grep -q 'Volume in drive : is NBDKITFLOPY' "$tmpdir/mdir" ||
  fail "mdir: no label: $(head "$tmpdir/mdir")"
grep -q 'LONGFI~1' "$tmpdir/mdir" && grep -q 'LONGF~10' "$tmpdir/mdir" ||
  fail "mdir: expected short names LONGFI~1 and LONGF~10"
grep -q '^README   TXT' "$tmpdir/mdir" ||
  fail "mdir: README.TXT should be a plain 8.3 entry"
mkdir "$tmpdir/back"
t mcopy -s -n -m -i "$img@@1M" '::*' '::.hidden' "$tmpdir/back/"
rm "$src/a symlink" "$src/a fifo"
# mtools turns characters outside the BMP (UTF-16 surrogate pairs) into
# "__"; check that name in the raw long name entry instead: sequence
# number 1 | last (0x41), then the first 5 UTF-16 units.
python3 - "$img" <<'PY'
import sys
img = open(sys.argv[1], "rb").read()
name = "😀 emoji.txt".encode("utf-16-le")
assert b"\x41" + name[:10] + b"\x0f" in img, "no long name entry for the emoji"
PY
mv "$tmpdir/back/sub/__ emoji.txt" "$tmpdir/back/sub/😀 emoji.txt" ||
  fail "mcopy did not copy the emoji file"
diff -r "$src" "$tmpdir/back" || fail "the tree read back by mcopy differs"
# mcopy -m kept the modification times FAT stored (2 s resolution).
python3 - "$src" "$tmpdir/back" <<'PY'
import os, sys
a, b = sys.argv[1:]
for f in ["README.TXT", "sub/big file with spaces.data"]:
    d = abs(os.stat(os.path.join(a, f)).st_mtime - os.stat(os.path.join(b, f)).st_mtime)
    assert d <= 2, (f, d)
PY

# Unaligned reads across region boundaries match the copy.
IMG="$img" t nbdsh -u "$uri" -c - <<'PY'
import os, random
img = open(os.environ["IMG"], "rb").read()
assert h.get_size() == len(img)
rng = random.Random(17)
for _ in range(300):
    off = rng.randrange(len(img))
    n = min(rng.randrange(1, 200000), len(img) - off)
    assert h.pread(n, off) == img[off:off + n], (off, n)
PY

# File bytes come from the file when read: change one in place.
printf 'J' | dd of="$src/hello.txt" bs=1 seek=0 conv=notrunc status=none
t nbdcopy "$uri" "$tmpdir/disk2.img"
t mcopy -n -i "$tmpdir/disk2.img@@1M" ::hello.txt "$tmpdir/hello2"
[ "$(cat "$tmpdir/hello2")" = "Jower case" ] ||
  fail "changed file not seen: $(cat "$tmpdir/hello2")"
# A file made shorter gives the client an error, not stale bytes.
: > "$src/exactly one cluster.bin"
expect_fail nbdcopy "$uri" "$tmpdir/disk3.img"
stop_server

# The same tree gives the same image.
t "$NBDKIT" -U - floppy "$src" --run 'nbdcopy "$uri" -' | sha256sum > "$tmpdir/s1"
t "$NBDKIT" -U - floppy "$src" --run 'nbdcopy "$uri" -' | sha256sum > "$tmpdir/s2"
cmp "$tmpdir/s1" "$tmpdir/s2" || fail "two builds of one tree differ"

# size= and label=: exact size, free space, the label.
t "$NBDKIT" -U - floppy dir="$src" size=300M label=my_disk \
  --run 'nbdinfo --size "$uri"; nbdcopy "$uri" '"$tmpdir/big.img" \
  > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = $((300 * 1024 * 1024)) ] ||
  fail "size=300M gave $(cat "$tmpdir/size")"
dd if="$tmpdir/big.img" of="$part" bs=1M skip=1 status=none
fsck.fat -n "$part" > "$tmpdir/fsck" 2>&1 || fail "fsck.fat: $(cat "$tmpdir/fsck")"
t mdir -i "$tmpdir/big.img@@1M" :: > "$tmpdir/mdir"
grep -q 'Volume in drive : is MY_DISK' "$tmpdir/mdir" ||
  fail "label: $(head -3 "$tmpdir/mdir")"
grep -q 'bytes free' "$tmpdir/mdir" || fail "no free space"
t mcopy -n -i "$tmpdir/big.img@@1M" "::sub/big file with spaces.data" \
  "$tmpdir/bigfile"
cmp "$tmpdir/bigfile" "$src/sub/big file with spaces.data" ||
  fail "size=300M: file differs"

# A 40G disk gets 32 KiB clusters (fewer, smaller FATs).  Only its
# partition is copied, through the partition filter (the whole disk
# is a minute of copying holes).
t "$NBDKIT" -U - --filter=partition floppy "$src" size=40G partition=1 \
  --run 'nbdcopy "$uri" '"$part"
spc="$(od -An -tu1 -j 13 -N1 "$part" | tr -d ' ')"
[ "$spc" = 64 ] || fail "size=40G: $spc sectors per cluster, expected 64"
t mcopy -n -i "$part" "::sub/big file with spaces.data" "$tmpdir/bigfile40"
cmp "$tmpdir/bigfile40" "$src/sub/big file with spaces.data" ||
  fail "size=40G: file differs"
fsck.fat -n "$part" > "$tmpdir/fsck" 2>&1 || fail "fsck.fat 40G: $(cat "$tmpdir/fsck")"
rm -f "$part"

# A small size= (under FAT32's minimum cluster count) still gives a
# file system that Linux's fsck.fat accepts.
rm -rf "$src/many" "$src/sub"
t "$NBDKIT" -U - floppy "$src" size=4M --run 'nbdcopy "$uri" '"$tmpdir/small.img"
dd if="$tmpdir/small.img" of="$part" bs=1M skip=1 status=none
fsck.fat -n "$part" > "$tmpdir/fsck" 2>&1 || fail "fsck.fat 4M: $(cat "$tmpdir/fsck")"

# An empty directory is a valid (empty) file system too.
mkdir "$tmpdir/void"
t "$NBDKIT" -U - floppy "$tmpdir/void" --run 'nbdcopy "$uri" '"$tmpdir/void.img"
dd if="$tmpdir/void.img" of="$part" bs=1M skip=1 status=none
fsck.fat -n "$part" > "$tmpdir/fsck" 2>&1 || fail "fsck.fat void: $(cat "$tmpdir/fsck")"
t mdir -i "$tmpdir/void.img@@1M" :: > /dev/null
