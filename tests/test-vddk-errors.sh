#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The vddk plugin's errors, against the stand-in VDDK library
# (vddk-stub.sh): a failed library call logs the library's own text and
# gives the client the matching error (EIO for an I/O error, ENOSPC for
# a full disk), a block list out of range is refused with EIO, a
# misaligned request gets EINVAL, a wrong password or a missing file
# fails the connection with the library's text; and the server refuses
# to start, with one line, without a library, with one too old, with a
# file that is not a library, and without the remote parameters.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/vddk-stub.sh"

# I/O errors at chosen sectors: 2048 (1 MiB) fails both ways, 4096
# (2 MiB) fails writes as a full disk.  The other sectors still work.
VIXSTUB_BAD_SECTOR=2048 VIXSTUB_FULL_SECTOR=4096 \
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh -u "$uri" -c -' 2> "$tmpdir/err" <<'PY' ||
import errno
def fails(fn, want):
    try:
        fn()
        assert False, "no error"
    except nbd.Error as e:
        assert e.errnum == want, (str(e), want)
fails(lambda: h.pread(4096, 1048576 - 2048), errno.EIO)
fails(lambda: h.pwrite(b"x" * 512, 1048576), errno.EIO)
fails(lambda: h.pwrite(b"x" * 1024, 2 * 1048576 - 512), errno.ENOSPC)
h.pwrite(b"y" * 512, 2 * 1048576 + 512)
assert h.pread(512, 2 * 1048576 + 512) == b"y" * 512
# A request that is not whole sectors, sent past libnbd's own check.
h.set_strict_mode(0)
fails(lambda: h.pread(100, 0), errno.EINVAL)
PY
  { cat "$tmpdir/err"; fail "errors from the library's I/O"; }
cat "$tmpdir/err"
for re in "VixDiskLib_Read: stub: injected I/O error \(stub error 90003\)" \
          "VixDiskLib_Write: stub: injected I/O error" \
          "VixDiskLib_Write: The disk is full \(stub error 8\)" \
          "read: offset 0 and count 100 must be multiples of 512"; do
  grep -Eq "$re" "$tmpdir/err" || fail "no log line matching /$re/"
done

# A block list outside the range asked about is refused, not used.
VIXSTUB_BAD_BLOCKS=1 \
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh --base-allocation -u "$uri" -c -' 2> "$tmpdir/err" <<'PY' ||
import errno
try:
    h.block_status(65536, 0, lambda *args: 0)
    assert False, "block status succeeded"
except nbd.Error as e:
    assert e.errnum == errno.EIO, str(e)
PY
  { cat "$tmpdir/err"; fail "a bad block list"; }
grep -q "QueryAllocatedBlocks: block 0 (sectors 128+128) is outside" \
  "$tmpdir/err" || fail "the bad block list was not reported: $(cat "$tmpdir/err")"

# A wrong password and a missing file: the connection fails, and the
# log has the library's words.
mkdir "$tmpdir/ds"
VIXSTUB_DATASTORE="$tmpdir/ds" VIXSTUB_PASSWORD=secret \
expect_fail t "$NBDKIT" -U - vddk libdir="$vddk80" server=esx.test \
  vm=moref=vm-7 user=root password=wrong '[ds1] guest.img' \
  --run 'nbdinfo --size "$uri"' 2> "$tmpdir/err"
grep -q "VixDiskLib_ConnectEx: stub: wrong user name or password" \
  "$tmpdir/err" || fail "wrong password: $(cat "$tmpdir/err")"
expect_fail t "$NBDKIT" -U - vddk libdir="$vddk80" "$tmpdir/missing" \
  --run 'nbdinfo --size "$uri"' 2> "$tmpdir/err"
grep -q "VixDiskLib_Open: The file was not found (stub error 4)" \
  "$tmpdir/err" || fail "missing file: $(cat "$tmpdir/err")"

# Start-up: the library.
mkdir -p "$tmpdir/empty/lib64" "$tmpdir/junk/lib64"
echo "not a library" > "$tmpdir/junk/lib64/libvixDiskLib.so.7"
refuses "no VDDK library found: looked for $tmpdir/empty/lib64/libvixDiskLib.so.9" \
  vddk libdir="$tmpdir/empty" "$disk" || fail "no library was not refused"
refuses "libvixDiskLib.so.8 is too old: it lacks VixDiskLib_Wait" \
  vddk libdir="$vddk60" "$disk" || fail "a library too old was not refused"
refuses "cannot load the VDDK library $tmpdir/junk/lib64/libvixDiskLib.so.7: " \
  vddk libdir="$tmpdir/junk" "$disk" || fail "a junk library was not refused"
# ... and the parameters.
refuses "the file parameter is required" vddk libdir="$vddk80" ||
  fail "no file was not refused"
refuses "a remote disk needs the vm parameter" \
  vddk libdir="$vddk80" server=esx.test user=root password=x '[ds] a' ||
  fail "a remote disk without vm was not refused"
refuses "a remote disk needs the password \(or cookie\) parameter" \
  vddk libdir="$vddk80" server=esx.test vm=moref=1 user=root '[ds] a' ||
  fail "a remote disk without a password was not refused"
refuses "compression: expected none, zlib, fastlz or skipz, not 'lzma'" \
  vddk libdir="$vddk80" compression=lzma "$disk" ||
  fail "compression=lzma was not refused"
refuses "port: " vddk libdir="$vddk80" port=70000 "$disk" ||
  fail "port=70000 was not refused"
