#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nfs plugin against a private nfs-ganesha (tests/nfs-ganesha.sh),
# over NFSv3 (through rpcbind) and NFSv4 (straight to the port): a copy
# gives the exported file's bytes, bytes written through the plugin
# (plain, FUA, then flush; and a whole copy in) are in the exported
# file, bytes written to the file are read through the plugin; -r and
# readonly=true serve read-only; --dump-plugin.
source "$(dirname "$0")/nfs-ganesha.sh"
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy nbdinfo
start_ganesha

disk="$nfs_rw/disk.img"
for version in 3 4; do
  case $version in
    3) url="$nfs_url/export/disk.img" ;;
    4) url="$nfs_url/export/disk.img?version=4&nfsport=20490" ;;
  esac
  head -c $(( 4 * 1024 * 1024 )) /dev/urandom > "$disk"

  t "$NBDKIT" -U - nfs "$url" --run "nbdcopy \"\$uri\" $tmpdir/copy" ||
    fail "NFSv$version: nbdcopy out"
  cmp "$disk" "$tmpdir/copy" || fail "NFSv$version: the copy differs"

  t "$NBDKIT" -U - nfs "$url" --run 'nbdsh -u "$uri" -c -' <<PY ||
assert h.get_size() == 4 * 1024 * 1024
assert not h.is_read_only() and h.can_flush() and h.can_fua()
h.pwrite(b"plain" * 1000, 1000)
h.pwrite(b"fua" * 1000, 3 * 1024 * 1024 + 7, nbd.CMD_FLAG_FUA)
h.zero(65536, 1024 * 1024)
h.flush()
with open("$disk", "rb") as f:
    data = f.read()
assert data[1000:6000] == b"plain" * 1000
assert data[3 * 1024 * 1024 + 7:3 * 1024 * 1024 + 3007] == b"fua" * 1000
assert data[1024 * 1024:1024 * 1024 + 65536] == bytes(65536)
with open("$disk", "r+b") as f:
    f.seek(2 * 1024 * 1024 + 3)
    f.write(b"written on the server")
assert h.pread(21, 2 * 1024 * 1024 + 3) == b"written on the server"
PY
    fail "NFSv$version: bytes through the plugin"

  head -c $(( 4 * 1024 * 1024 )) /dev/urandom > "$tmpdir/src"
  t "$NBDKIT" -U - nfs "$url" --run "nbdcopy $tmpdir/src \"\$uri\"" ||
    fail "NFSv$version: nbdcopy in"
  cmp "$tmpdir/src" "$disk" || fail "NFSv$version: the file is not the copy"
done

# Read-only, by -r and by readonly=true.
t "$NBDKIT" -r -U - nfs "$nfs_url/export/disk.img" \
  --run 'nbdsh -u "$uri" -c "assert h.is_read_only()"' || fail "-r"
t "$NBDKIT" -U - nfs "$nfs_url/export/disk.img" readonly=true \
  --run 'nbdsh -u "$uri" -c "assert h.is_read_only()"' || fail "readonly=true"

"$NBDKIT" nfs --dump-plugin | grep -qx "libnfs_multithreading=no" ||
  fail "--dump-plugin"
