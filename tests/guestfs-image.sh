# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Sourced by the guestfs plugin's tests after functions.sh: what they
# share.  The appliance runs under qemu's TCG: KVM is not usable on
# every machine the suite runs on (nested virtualisation here fails
# with "failed to set MSR 0x10a", CI runners often have no /dev/kvm),
# and TCG launches everywhere in about 15 s.  The direct backend keeps
# libvirtd out of it.
requires_cmd sfdisk mkfs.ext4 nbdsh nbdcopy
# ASan intercepts the XDR functions, but on Debian 12 they live in
# libtirpc, which only arrives with libguestfs after ASan has looked
# them up: libguestfs's first xdrmem_create jumps to address 0 (seen
# here in the sanitizer build; llvm-project issue 81470).
skip_under_sanitizers "ASan's XDR interceptors crash libguestfs"
requires test -e /usr/bin/supermin
export LIBGUESTFS_BACKEND=direct
export LIBGUESTFS_BACKEND_SETTINGS="${LIBGUESTFS_BACKEND_SETTINGS:-force_tcg}"

so="$abs_top_builddir/plugins/guestfs/.libs/nbdkit-guestfs-plugin.so"
[ -f "$so" ] || fail "$so not built"

# The launch happens in open, inside the negotiation: give it more than
# the default --handshake-timeout of 30 s, since two appliances may boot
# at once on a loaded machine.
hs="--handshake-timeout=120"

# An 8 MiB raw image with an MBR partition table and one partition,
# sectors 2048 to 12287 (5 MiB), holding an ext4 filesystem with a
# known file.  The partition's bytes are kept in $tmpdir/part.img;
# nothing here starts an appliance.
part_start=2048 part_sectors=10240
part_size=$(( part_sectors * 512 ))
mkdir "$tmpdir/root"
echo "hello from inside the image" > "$tmpdir/root/hello.txt"
head -c 100000 /dev/urandom > "$tmpdir/root/random.bin"
truncate -s 8M "$tmpdir/disk.img"
printf 'label: dos\nstart=%d, size=%d, type=83\n' $part_start $part_sectors |
  sfdisk -q "$tmpdir/disk.img" || fail "sfdisk failed"
truncate -s $part_size "$tmpdir/part.img"
mkfs.ext4 -q -F -d "$tmpdir/root" "$tmpdir/part.img" || fail "mkfs.ext4 failed"
dd if="$tmpdir/part.img" of="$tmpdir/disk.img" bs=512 seek=$part_start \
  conv=notrunc status=none

# partition_bytes OUT: the partition's current bytes in the image.
partition_bytes ()
{
  dd if="$tmpdir/disk.img" of="$1" bs=512 skip=$part_start \
    count=$part_sectors status=none
}
