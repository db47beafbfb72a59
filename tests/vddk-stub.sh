# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Sourced by tests/test-vddk-*.sh, after functions.sh: lays out VDDK
# directories around the stand-in library (plugins/vddk/test-stub/,
# built by tests/plugins/vddk.mk) as VMware's tarball does, and makes a
# disk for the plugin to serve.
#   $vddk80  a libdir whose lib64/libvixDiskLib.so.8 has every entry point
#   $vddk65  one whose lib64/libvixDiskLib.so.6 is VDDK 6.5's (no
#            QueryAllocatedBlocks)
#   $vddk60  one whose library lacks VixDiskLib_Wait (older than 6.5)
#   $disk    4 MiB + 4 KiB, random data at 1 MiB (64 KiB) and at
#            3 MiB - 512 (1 KiB, across two chunks), holes elsewhere
#   $stublog what the stand-in logs (VIXSTUB_LOG, exported)
requires_cmd nbdsh nbdinfo nbdcopy truncate

for v in 80:8 65:6 60:8; do
  so="$abs_builddir/.libs/vixstub${v%:*}.so"
  [ -f "$so" ] || fail "$so not built (tests/plugins/vddk.mk)"
  mkdir -p "$tmpdir/vddk${v%:*}/lib64"
  ln -s "$so" "$tmpdir/vddk${v%:*}/lib64/libvixDiskLib.so.${v#*:}"
done
vddk80="$tmpdir/vddk80"
vddk65="$tmpdir/vddk65"
vddk60="$tmpdir/vddk60"

disk="$tmpdir/disk"
truncate -s $(( 4 * 1024 * 1024 + 4096 )) "$disk"
head -c 65536 /dev/urandom |
  dd of="$disk" bs=65536 seek=16 conv=notrunc status=none
head -c 1024 /dev/urandom |
  dd of="$disk" bs=512 seek=$(( 3 * 2048 - 1 )) conv=notrunc status=none

export VIXSTUB_LOG="$tmpdir/stub.log"
stublog="$VIXSTUB_LOG"
