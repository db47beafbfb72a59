#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=ext2 ext2file=PATH serves one file inside an ext2/3/4 image
# made by mke2fs -d: the same size, flags and bytes as Debian's nbdkit
# with its own ext2 filter, read-write, read-only and after writes of
# every kind; nbdcopy and qemu-img compare see the file's bytes; writes
# (into data and into holes, across block boundaries, zeroes, FUA) are
# still there after a restart and are what debugfs reads out of the
# image, which e2fsck finds clean; -r writes nothing; the filter works
# over a partition of a disk (the partition filter below it).
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd mke2fs debugfs e2fsck qemu-img

# A 3 MiB + 777 byte file with a 1 MiB hole in the middle (mke2fs -d
# keeps holes), and a small one.
dir="$tmpdir/dir"
mkdir -p "$dir/disks"
/usr/bin/python3 - "$dir/disks/disk.raw" <<'PY'
import random, sys
r = random.Random(2)
with open(sys.argv[1], "wb") as f:
    f.write(r.randbytes(1 << 20))
    f.seek(2 << 20)
    f.write(r.randbytes((1 << 20) + 777))
PY
printf 'hello\n' > "$dir/small"
file="$dir/disks/disk.raw"
size=$(stat -c %s "$file")
img="$tmpdir/fs.img"
mke2fs -q -t ext4 -d "$dir" "$img" 32M
cp "$img" "$img.orig"

# What each server is asked.  Debian's ext2 filter passes the plugin's
# block status through unchanged (the image's extents, at the file's
# offsets), so its map is wrong and nbdcopy skips real data as holes:
# the compared probes read everything, and our map is checked below.
cat > "$tmpdir/ext2-read" <<EOF
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 $probedir/flags.py
echo "copy-all \$(nbdcopy --no-extents "\$1" - | sha256sum)"
EOF
cat > "$tmpdir/ext2-write" <<EOF
#!/bin/sh
set -e
nbdsh -u "\$1" -c - < $probedir/write.py
echo "copy-all \$(nbdcopy --no-extents "\$1" - | sha256sum)"
EOF
chmod +x "$tmpdir/ext2-read" "$tmpdir/ext2-write"

fresh_files=("$img")
compare_own ext2-read "$tmpdir/ext2-read" \
  --filter=ext2 file "$img" ext2file=/disks/disk.raw
expect_in ext2-read "$ours" "^export-size=$size is_read_only=False"
expect_in ext2-read "$ours" "^copy-all $(sha256sum < "$file" | cut -d' ' -f1)"
compare_own ext2-readonly "$tmpdir/ext2-read" \
  -r --filter=ext2 file "$img" ext2file=/disks/disk.raw
compare_own ext2-write "$tmpdir/ext2-write" \
  --filter=ext2 file "$img" ext2file=/disks/disk.raw
expect_in ext2-write "$ours" "^pwrite-fua ok"
expect_in ext2-write "$ours" "^zero ok"
for t in ext2 ext3; do
  mke2fs -q -t $t -d "$dir" "$tmpdir/$t.img" 32M
  cp "$tmpdir/$t.img" "$tmpdir/$t.img.orig"
  fresh_files=("$tmpdir/$t.img")
  compare_own "ext2-$t" "$tmpdir/ext2-write" \
    --filter=ext2 file "$tmpdir/$t.img" ext2file=/disks/disk.raw
done
fresh_files=()

# --- Our map, nbdcopy and qemu-img compare --------------------------------
cp "$img.orig" "$img"
start_server --filter=ext2 file "$img" ext2file=/disks/disk.raw
t nbdinfo --map "$uri" > "$tmpdir/map"
printf '%10d %11d %4d  %s\n' 0 "$size" 0 data | diff -bu - "$tmpdir/map" ||
  fail "map is not one data extent"
t nbdcopy "$uri" "$tmpdir/copy.raw"
cmp "$file" "$tmpdir/copy.raw" || fail "nbdcopy copy differs from the file"
t qemu-img compare -f raw -F raw "$file" "$uri" ||
  fail "qemu-img compare found a difference"

# --- Writes, read back after a restart and by debugfs ---------------------
cp "$file" "$tmpdir/expected"
t nbdsh -u "$uri" -c - <<PY
import random
r = random.Random(9)
exp = bytearray(open("$tmpdir/expected", "rb").read())
def write(off, buf, flags=0):
    h.pwrite(buf, off, flags)
    exp[off:off + len(buf)] = buf
# Into data, into the hole (new blocks), across block boundaries,
# unaligned, at the very end, with FUA; then zeroes.
write(0, b"start of the file")
write(4096 - 3, r.randbytes(10))
write((1 << 20) - 100, r.randbytes(5000))         # data into hole
write((1 << 20) + 300000, r.randbytes(70000))     # inside the hole
write((2 << 20) - 1, b"x" * 3)
write(len(exp) - 7, b"the end", nbd.CMD_FLAG_FUA)
h.zero(10000, 20000)
exp[20000:30000] = bytes(10000)
h.zero(5, (1 << 20) + 310000)
exp[(1 << 20) + 310000:(1 << 20) + 310005] = bytes(5)
h.flush()
assert h.pread(len(exp), 0) == exp, "read back before restart"
open("$tmpdir/expected", "wb").write(exp)
PY
stop_server
start_server --filter=ext2 file "$img" ext2file=/disks/disk.raw
t nbdcopy "$uri" "$tmpdir/after.raw"
stop_server
cmp "$tmpdir/expected" "$tmpdir/after.raw" ||
  fail "writes not there after a restart"
debugfs -R 'cat /disks/disk.raw' "$img" > "$tmpdir/debugfs.raw" 2>/dev/null
cmp "$tmpdir/expected" "$tmpdir/debugfs.raw" ||
  fail "debugfs reads other bytes than were written"
debugfs -R 'cat /small' "$img" 2>/dev/null | grep -qx hello ||
  fail "another file changed"
e2fsck -fn "$img" > "$tmpdir/fsck.out" 2>&1 ||
  fail "e2fsck finds the image damaged: $(cat "$tmpdir/fsck.out")"

# --- Read-only: writes refused, the image untouched -----------------------
cp "$img" "$tmpdir/before.img"
start_server -r --filter=ext2 file "$img" ext2file=/disks/disk.raw
t nbdsh -u "$uri" -c - <<'PY'
assert h.is_read_only()
h.set_strict_mode(0)
try:
    h.pwrite(b"x" * 512, 0)
except nbd.Error:
    pass
else:
    raise AssertionError("write succeeded under -r")
h.pread(h.get_size(), 0)
PY
stop_server
cmp "$tmpdir/before.img" "$img" || fail "-r changed the image"

# --- Over a partition, as in the man page's example ------------------------
# The layer below is Debian's partition filter (ours may not be built).
if command -v sfdisk > /dev/null &&
   [ -f "$debian_filterdir/nbdkit-partition-filter.so" ]; then
  disk="$tmpdir/disk.img"
  truncate -s 20M "$disk"
  printf 'label: dos\nstart=2048, size=32768, type=83\n' | sfdisk -q "$disk"
  mke2fs -q -t ext4 -d "$dir" -E offset=1048576 "$disk" 16M
  t "$NBDKIT" -U - --filter=ext2 \
    --filter="$debian_filterdir/nbdkit-partition-filter.so" \
    file "$disk" partition=1 ext2file=/small \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"HELLO\", 0); h.flush()"'
  t "$NBDKIT" -U - --filter=ext2 \
    --filter="$debian_filterdir/nbdkit-partition-filter.so" \
    file "$disk" partition=1 ext2file=/small \
    --run 'nbdcopy "$uri" -' > "$tmpdir/small.out"
  printf 'HELLO\n' | cmp - "$tmpdir/small.out" ||
    fail "write through ext2 over partition 1 not read back"
fi

finish
