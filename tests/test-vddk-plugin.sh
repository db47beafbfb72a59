#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The vddk plugin against the stand-in VDDK library (vddk-stub.sh):
# the library is dlopened from libdir=, bytes read and written reach
# the file, FUA and flush reach the library, the block status map is
# the file's allocation in 64 KiB chunks with a short tail as data,
# -r opens read-only, every parameter reaches the library where
# VMware's headers put it, and with VDDK 6.5's library (no
# QueryAllocatedBlocks) the map is all data.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/vddk-stub.sh"

# A copy gives the file's bytes.
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run "nbdcopy \"\$uri\" $tmpdir/copy" || fail "nbdcopy from vddk"
cmp "$disk" "$tmpdir/copy" || fail "the copy differs from the disk"

# The map: data chunks at 1M and around 3M, the 4 KiB tail as data.
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdinfo --map "$uri"' > "$tmpdir/map"
cat "$tmpdir/map"
cat > "$tmpdir/map.expected" <<'MAP'
0 1048576 3 hole,zero
1048576 65536 0 data
1114112 1966080 3 hole,zero
3080192 131072 0 data
3211264 983040 3 hole,zero
4194304 4096 0 data
MAP
awk '{ print $1, $2, $3, $4 }' "$tmpdir/map" | diff - "$tmpdir/map.expected" ||
  fail "the map is not the file's allocation"

# Writes through the server land in the file, and a change to the file
# is read by the next connection.  The stand-in logs a flush for FUA.
: > "$stublog"
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh -u "$uri" -c -' <<PY || fail "read/write through vddk"
assert h.get_size() == 4 * 1024 * 1024 + 4096
assert h.can_flush() and h.can_fua() and not h.is_read_only()
assert h.get_block_size(nbd.SIZE_MINIMUM) == 512
h.pwrite(b"A" * 4096, 8192)
h.pwrite(b"B" * 512, 4 * 1024 * 1024 + 3584, nbd.CMD_FLAG_FUA)
h.zero(1024, 2 * 1024 * 1024)
h.flush()
with open("$disk", "rb") as f:
    f.seek(8192); assert f.read(4096) == b"A" * 4096
    f.seek(4 * 1024 * 1024 + 3584); assert f.read(512) == b"B" * 512
with open("$disk", "r+b") as f:
    f.seek(1048576); f.write(b"changed!")
PY
[ "$(grep -c '^Flush$' "$stublog")" -eq 2 ] ||
  fail "FUA and flush did not both reach the library: $(cat "$stublog")"
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh -u "$uri" -c "assert h.pread(512, 1048576)[:8] == b\"changed!\""' ||
  fail "a change to the file was not read"

# -r: the library is asked for a read-only connection and disk.
: > "$stublog"
t "$NBDKIT" -r -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh -u "$uri" -c "assert h.is_read_only()"' || fail "-r"
grep -qx "ConnectEx local readonly=1 snapshot=(null) transports=(null)" \
  "$stublog" && grep -qx "Open $disk flags=0x4" "$stublog" ||
  fail "-r did not reach the library: $(cat "$stublog")"

# A remote disk: every parameter where VMware's headers put it; the
# file names a datastore, which the stand-in finds under
# VIXSTUB_DATASTORE.  single-link, unbuffered and zlib are open flags
# 0x2, 0x1 and 0x10.
mkdir "$tmpdir/ds" && cp "$disk" "$tmpdir/ds/guest.img"
echo secret > "$tmpdir/pw"
echo 'tmpDirectory="/tmp"' > "$tmpdir/vddk.conf"
: > "$stublog"
VIXSTUB_DATASTORE="$tmpdir/ds" VIXSTUB_PASSWORD=secret \
t "$NBDKIT" -U - vddk libdir="$vddk80" config="$tmpdir/vddk.conf" \
  server=esx.test vm=moref=vm-7 user=root password=+"$tmpdir/pw" \
  thumbprint=AA:BB:CC port=8443 nfchostport=9020 snapshot=snapshot-3 \
  transports=nbdssl:nbd single-link=true unbuffered=true compression=zlib \
  '[ds1] guest.img' --run 'nbdinfo --size "$uri"' > "$tmpdir/size" ||
  fail "remote disk"
[ "$(cat "$tmpdir/size")" = $(( 4 * 1024 * 1024 + 4096 )) ] ||
  fail "remote size $(cat "$tmpdir/size")"
cat > "$tmpdir/log.expected" <<LOG
InitEx 6.5 libdir=$vddk80 config=$tmpdir/vddk.conf
ConnectEx server=esx.test vm=moref=vm-7 thumbprint=AA:BB:CC port=8443 nfchostport=9020 uid user=root password=secret readonly=0 snapshot=snapshot-3 transports=nbdssl:nbd
Open [ds1] guest.img flags=0x13
Exit
LOG
diff "$tmpdir/log.expected" "$stublog" ||
  fail "the remote parameters did not reach the library as expected"

# A session cookie instead of the password.
: > "$stublog"
VIXSTUB_DATASTORE="$tmpdir/ds" \
t "$NBDKIT" -r -U - vddk libdir="$vddk80" server=esx.test vm=moref=vm-7 \
  cookie=c00k1e '[ds1] guest.img' --run 'nbdinfo --size "$uri"' \
  > /dev/null || fail "remote disk with a cookie"
grep -qx "ConnectEx server=esx.test vm=moref=vm-7 cookie=c00k1e user=(null) readonly=1" \
  "$stublog" && grep -qx "Open \[ds1\] guest.img flags=0x4" "$stublog" ||
  fail "the cookie did not reach the library: $(cat "$stublog")"

# VDDK 6.5 (no QueryAllocatedBlocks): bytes as before, the map all data.
t "$NBDKIT" -U - vddk libdir="$vddk65" "$disk" \
  --run "nbdcopy \"\$uri\" $tmpdir/copy65 && nbdinfo --map \"\$uri\"" \
  > "$tmpdir/map65" || fail "vddk with VDDK 6.5's library"
cmp "$disk" "$tmpdir/copy65" || fail "the copy (6.5) differs from the disk"
[ "$(awk '{ print $1, $2, $3 }' "$tmpdir/map65")" = "0 4198400 0" ] ||
  fail "the map with VDDK 6.5: $(cat "$tmpdir/map65")"
