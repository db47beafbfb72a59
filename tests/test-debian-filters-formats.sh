#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: Debian's prebuilt filters that decode a container (gzip,
# xz, tar, ext2, luks), loaded by path into OUR server over our file
# plugin, serve the same bytes and map as Debian's nbdkit running the
# same command, and those bytes are the disk that was put in the
# container (tests/debian-filters.sh).  nbdcopy skips what block status
# calls a hole, so a filter's map that leaks the container's holes
# shows up as wrong bytes here.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
PATH="$PATH:/usr/sbin:/sbin"
requires_cmd gzip xz tar mke2fs qemu-img

raw="$tmpdir/pattern.raw"
make_pattern "$raw" $((4 * 1024 * 1024))
sha="$(sha256sum < "$raw")"
sha="${sha%% *}"

# gzip: the whole file is decompressed at open; the export is read-only.
gzip -c -1 "$raw" > "$tmpdir/disk.gz"
compare gzip read --filter=gzip file "$tmpdir/disk.gz"
expect_in gzip-bytes "$ours" "^copy $sha  -\$"

# xz: several blocks, so the filter seeks through the xz index.
xz -c -0 --block-size=262144 "$raw" > "$tmpdir/disk.xz"
compare xz read --filter=xz file "$tmpdir/disk.xz"
expect_in xz-bytes "$ours" "^copy $sha  -\$"
compare xz-maxblock read --filter=xz file "$tmpdir/disk.xz" \
  xz-max-block=1M xz-max-depth=2
expect_in xz-maxblock-bytes "$ours" "^copy $sha  -\$"

# tar: one member of an archive, read and written in place.
mkdir "$tmpdir/tree"
echo "first member" > "$tmpdir/tree/README"
cp "$raw" "$tmpdir/tree/disk.img"
tar -C "$tmpdir/tree" --format=gnu -cf "$tmpdir/disk.tar.orig" README disk.img
state_files=("$tmpdir/disk.tar")
compare tar read --filter=tar file "$tmpdir/disk.tar" tar-entry=disk.img
expect_in tar-bytes "$ours" "^copy $sha  -\$"
compare tar-write write --filter=tar file "$tmpdir/disk.tar" tar-entry=disk.img

# ext2: a file inside a filesystem image made by mke2fs -d.  Writes
# change inode times, so the image's own bytes differ from run to run:
# only what the client reads back is compared.
mke2fs -q -F -t ext2 -b 4096 -d "$tmpdir/tree" "$tmpdir/fs.img.orig" 8M
state_files=()
fresh_files=("$tmpdir/fs.img")
# Debian's ext2 filter (1.32) has neither .extents nor .can_extents, so
# by the filter API the plugin's map of the whole image comes through
# unshifted: nbdcopy then skips data, under Debian's nbdkit and under
# ours alike.  What the filter itself serves is checked with
# nbdcopy --no-extents.
compare ext2 read --filter=ext2 file "$tmpdir/fs.img" ext2file=/disk.img
expect_in ext2-bytes "$ours" "^copy-all $sha  -\$"
compare ext2-write write --filter=ext2 file "$tmpdir/fs.img" ext2file=/disk.img

# luks: an image encrypted by qemu-img (a low iteration count keeps the
# key derivation quick).  Sectors are encrypted with IVs from their
# number, so the same writes give the same ciphertext in the file.
# qemu-img times its key derivation and now and then gives up with
# "Unable to get accurate CPU usage" (half the time on a loaded
# machine): up to 30 tries, a little apart.
# Not tested: a wrong passphrase, on which Debian's luks filter (1.32)
# crashes in its .close after .prepare failed, under both servers.
echo -n "nbdkit-test-secret" > "$tmpdir/passphrase"
for i in $(seq 30); do
  [ "$i" -eq 1 ] || sleep 0.2
  qemu-img convert -q --object secret,id=sec0,file="$tmpdir/passphrase" \
    -O luks -o key-secret=sec0,iter-time=10 "$raw" "$tmpdir/disk.luks.orig" \
    2>"$tmpdir/qemu-img.err" && break
done
[ -s "$tmpdir/disk.luks.orig" ] || fail "qemu-img: $(cat "$tmpdir/qemu-img.err")"
fresh_files=()
state_files=("$tmpdir/disk.luks")
compare luks read --filter=luks file "$tmpdir/disk.luks" \
  passphrase=+"$tmpdir/passphrase"
expect_in luks-bytes "$ours" "^copy $sha  -\$"
compare luks-write write --filter=luks file "$tmpdir/disk.luks" \
  passphrase=+"$tmpdir/passphrase"

finish
