#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=qcow2dec serves what qemu-img convert -O raw makes of a qcow2
# image, read-only: images made by qemu-img and qemu-io (versions 2 and
# 3, 512-byte, 64 KiB and 2 MiB clusters, zero and unallocated clusters,
# an internal snapshot, compressed clusters with deflate and zstd) give
# the same bytes (nbdcopy, compared with cmp) and block status reports
# holes exactly where qemu-img map says there is no data.  An image
# with a backing file is refused with an error naming it, and corrupt
# images (header fields and table entries pointing outside the image,
# garbage compressed data) fail cleanly: the connection, or only the
# requests that need the bad entry, with EIO.
source "$(dirname "$0")/functions.sh"
requires_cmd qemu-img qemu-io nbdcopy nbdinfo nbdsh python3

# same IMAGE: the bytes and the holes through the filter are qemu's.
same ()
{
  local img="$tmpdir/$1"
  qemu-img convert -O raw "$img" "$tmpdir/ref.raw"
  qemu-img map --output=json "$img" > "$tmpdir/ref.map"
  rm -f "$tmpdir/got.raw"
  t "$NBDKIT" -U - --filter=qcow2dec file "$img" --run "
    nbdcopy \"\$uri\" $tmpdir/got.raw &&
    nbdinfo --map --json \"\$uri\" > $tmpdir/got.map" ||
    fail "$1: the server or a client failed"
  cmp "$tmpdir/ref.raw" "$tmpdir/got.raw" ||
    fail "$1: bytes differ from qemu-img convert -O raw"
  python3 - "$tmpdir/ref.map" "$tmpdir/got.map" <<'PY' || fail "$1: map"
import json, sys
# Runs of (hole?, length), adjacent runs of the same kind merged.
def runs(items):
    out = []
    for start, length, hole in items:
        if out and out[-1][0] == hole:
            out[-1][1] += length
        else:
            out.append([hole, length])
    return out
ref = runs((e["start"], e["length"], not e["data"])
           for e in json.load(open(sys.argv[1])))
got = runs((e["offset"], e["length"], bool(e["type"] & 1))
           for e in json.load(open(sys.argv[2])))
if ref != got:
    sys.exit("qemu-img map %s\nnbdinfo --map %s" % (ref, got))
PY
  echo "$1: same bytes and holes as qemu"
}

# Version 3, 64 KiB clusters: data, zero clusters, unallocated clusters,
# a write across a cluster and L2 table boundary.
qemu-img create -q -f qcow2 "$tmpdir/v3.qcow2" 700M
qemu-io -f qcow2 -c 'write -P 0x11 0 64k' -c 'write -P 0x22 100000 200000' \
  -c 'write -z 1M 2M' -c 'write -P 0x33 511M 2M' \
  -c 'write -P 0x44 733999104 4096' "$tmpdir/v3.qcow2" > /dev/null
same v3.qcow2

# Version 2 (compat=0.10), 512-byte clusters: 64 entries per L2 table, so
# the 200 KiB write spans several tables.
qemu-img create -q -f qcow2 -o compat=0.10,cluster_size=512 \
  "$tmpdir/v2.qcow2" 3M
qemu-io -f qcow2 -c 'write -P 0x55 1000 200k' -c 'write -P 0x66 2M 4097' \
  -c 'write -z 2105344 8192' "$tmpdir/v2.qcow2" > /dev/null
same v2.qcow2

# 2 MiB clusters and an internal snapshot taken before an overwrite:
# the current state is served, not the snapshot's.
qemu-img create -q -f qcow2 -o cluster_size=2M "$tmpdir/snap.qcow2" 9M
qemu-io -f qcow2 -c 'write -P 0x77 0 3M' "$tmpdir/snap.qcow2" > /dev/null
qemu-img snapshot -c before "$tmpdir/snap.qcow2"
qemu-io -f qcow2 -c 'write -P 0x88 1M 2M' -c 'write -P 0x99 8M 1M' \
  "$tmpdir/snap.qcow2" > /dev/null
same snap.qcow2
qemu-img snapshot -l "$tmpdir/snap.qcow2" | grep -q before ||
  fail "the snapshot was not made"

# Compressed clusters from qemu-img convert -c: random data (stored
# compressed only where it shrinks), text (compresses well), zeros
# (become holes).  Deflate with 64 KiB, 512-byte (version 2) and 2 MiB
# clusters, and zstd.
head -c 1500000 /dev/urandom > "$tmpdir/src.raw"
yes 'qcow2dec compressed cluster' | head -c 2500000 >> "$tmpdir/src.raw"
head -c 1000000 /dev/zero >> "$tmpdir/src.raw"
yes 'tail' | head -c 12345 >> "$tmpdir/src.raw"
qemu-img convert -c -O qcow2 "$tmpdir/src.raw" "$tmpdir/c64k.qcow2"
qemu-img convert -c -O qcow2 -o compat=0.10,cluster_size=512 \
  "$tmpdir/src.raw" "$tmpdir/c512.qcow2"
qemu-img convert -c -O qcow2 -o cluster_size=2M \
  "$tmpdir/src.raw" "$tmpdir/c2m.qcow2"
qemu-img convert -c -O qcow2 -o compression_type=zstd \
  "$tmpdir/src.raw" "$tmpdir/zstd.qcow2"
for img in c64k c512 c2m zstd; do
  same $img.qcow2
  # The source is the reference too: qemu-img rounds the size up to
  # 512 bytes.
  cmp -n "$(stat -c %s "$tmpdir/src.raw")" "$tmpdir/src.raw" \
    "$tmpdir/got.raw" || fail "$img: not the source's bytes"
done

# qemu-io's write -c mixes compressed clusters with stored ones.
qemu-img create -q -f qcow2 "$tmpdir/mixed.qcow2" 1M
qemu-io -f qcow2 -c 'write -P 0x11 0 64k' -c 'write -c -P 0x22 192k 64k' \
  -c 'write -c -P 0x23 512k 64k' "$tmpdir/mixed.qcow2" > /dev/null
same mixed.qcow2

# --- The export: read-only, the virtual size ------------------------------
t "$NBDKIT" -U - --filter=qcow2dec file "$tmpdir/v3.qcow2" --run '
  nbdsh -u "$uri" -c "
import errno
assert h.get_size() == 700 * 1024 * 1024, h.get_size()
assert h.is_read_only()
assert h.pread(4, 511 * 1024 * 1024) == b\"\\x33\" * 4
try:
    h.pwrite(b\"x\" * 512, 0)
    raise AssertionError(\"a write succeeded\")
except nbd.Error as e:
    assert e.errnum in (errno.EPERM, errno.EROFS), e
"' || fail "size, read-only"

# --- A backing file: refused, naming it -----------------------------------
qemu-img create -q -f qcow2 -b v2.qcow2 -F qcow2 "$tmpdir/overlay.qcow2"
status=0
t "$NBDKIT" -U - --filter=qcow2dec file "$tmpdir/overlay.qcow2" \
  --run 'nbdinfo "$uri"' > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
cat "$tmpdir/err"
[ "$status" -ne 0 ] || fail "an image with a backing file was served"
grep -q 'qcow2dec.*error: the qcow2 image has a backing file ("v2.qcow2")' \
  "$tmpdir/err" || fail "no error naming the backing file"
grep -q '^nbdinfo: .*server replied with error' "$tmpdir/err" ||
  fail "the client did not see the refusal"

# --- Corrupt images ---------------------------------------------------------
# patch IMAGE OFFSET-EXPR VALUE-EXPR SIZE: write the big-endian VALUE
# (SIZE bytes) at OFFSET of a copy of v3.qcow2 or c64k.qcow2.  The
# expressions may use l1 (the L1 table's offset), l2 (the first L2
# table's offset), e0 (the first L2 entry) and cb (cluster_bits).
patch ()
{
  python3 - "$@" <<'PY'
import struct, sys
path, off_expr, val_expr, size = sys.argv[1:]
with open(path, "r+b") as f:
    data = f.read()
    cb = l1 = l2 = e0 = 0
    try:
        cb = struct.unpack(">I", data[20:24])[0]
        l1 = struct.unpack(">Q", data[40:48])[0]
        l2 = struct.unpack(">Q", data[l1:l1 + 8])[0] & 0x00fffffffffffe00
        e0 = struct.unpack(">Q", data[l2:l2 + 8])[0]
    except struct.error:
        pass                    # a truncated image: only the header
    off, val = eval(off_expr), eval(val_expr)
    f.seek(off)
    f.write(val.to_bytes(int(size), "big"))
PY
}

# refused FROM OFFSET VALUE SIZE REGEX: a patched copy of FROM fails the
# connection with REGEX in the server's log, and the server survives
# to say so.
refused ()
{
  local from="$1" status=0
  cp "$tmpdir/$from" "$tmpdir/bad.qcow2"
  patch "$tmpdir/bad.qcow2" "$2" "$3" "$4"
  t "$NBDKIT" -U - --filter=qcow2dec file "$tmpdir/bad.qcow2" \
    --run 'nbdinfo --size "$uri"' > "$tmpdir/out" 2> "$tmpdir/err" ||
    status=$?
  if [ "$status" -eq 0 ] || ! grep -Eq "$5" "$tmpdir/err"; then
    cat "$tmpdir/err"
    fail "patch $2=$3: status $status, wanted an error matching /$5/"
  fi
  echo "refused: $5"
}
refused v3.qcow2 0 0 4 'not qcow2'
refused v3.qcow2 4 4 4 'version 4 is not supported'
refused v3.qcow2 20 40 4 'cluster_bits 40 is out of range'
refused v3.qcow2 32 2 4 'is encrypted'
refused v3.qcow2 40 '1 << 62' 8 'L1 table offset .* past the end'
refused v3.qcow2 40 'l1 + 512' 8 'L1 table offset .* misaligned'
refused v3.qcow2 24 '1 << 60' 8 'does not cover the virtual size'
refused v3.qcow2 8 '1 << 40' 8 'backing file whose name .* not inside'
refused v3.qcow2 72 '1 << 4' 8 'extended L2 entries'
refused v3.qcow2 72 '1 << 2' 8 'external data file'
refused v3.qcow2 72 '1 << 1' 8 'marked corrupt'
refused v3.qcow2 72 '1 << 9' 8 'unknown incompatible features'
refused zstd.qcow2 104 9 1 'compression type 9 is not supported'
# A truncated image: its L1 table is cut off.
l1=$(od -An -tx1 -j40 -N8 "$tmpdir/v3.qcow2" | tr -d ' \n')
head -c $(( 0x$l1 + 4 )) "$tmpdir/v3.qcow2" > "$tmpdir/short.qcow2"
refused short.qcow2 0 0 0 'L1 table offset .* past the end'
: > "$tmpdir/empty.qcow2"
refused empty.qcow2 0 0 0 'not qcow2'
# Real images with what the filter does not support (patched by 0
# bytes: as qemu-img made them).
qemu-img create -q -f qcow2 -o extended_l2=on "$tmpdir/l2ext.qcow2" 1M
refused l2ext.qcow2 0 0 0 'extended L2 entries'
# (qcow2's own AES scheme: LUKS would first time its key derivation,
# which fails on a busy machine.)
qemu-img create -q -f qcow2 --object secret,id=sec0,data=secret \
  -o encrypt.format=aes,encrypt.key-secret=sec0 "$tmpdir/aes.qcow2" 1M
refused aes.qcow2 0 0 0 'is encrypted'

# bad_entry FROM OFFSET VALUE SIZE REGEX: the connection works, a read
# of the first cluster fails with EIO (REGEX in the log), and a read of
# a cluster elsewhere (in another L2 table's reach) still works.
bad_entry ()
{
  local from="$1"
  cp "$tmpdir/$from" "$tmpdir/bad.qcow2"
  patch "$tmpdir/bad.qcow2" "$2" "$3" "$4"
  t "$NBDKIT" -U - --filter=qcow2dec file "$tmpdir/bad.qcow2" \
    --run 'nbdsh --base-allocation -u "$uri" -c "
import errno
for what in (\"pread\", \"extents\"):
    try:
        if what == \"pread\":
            h.pread(4096, 0)
        else:
            h.block_status(65536, 0, lambda *a: 0)
        raise AssertionError(what + \" of a bad entry succeeded\")
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e
assert h.pread(4, h.get_size() - 4096) == b\"\\x44\" * 4
"' 2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "bad entry $2=$3"; }
  grep -Eq "$5" "$tmpdir/err" || { cat "$tmpdir/err"; fail "no /$5/"; }
  echo "bad entry: $5"
}
bad_entry v3.qcow2 l1 '1 << 50' 8 'L1 entry .* past the end'
bad_entry v3.qcow2 l1 'l2 + 512' 8 'L1 entry .* misaligned'
bad_entry v3.qcow2 l2 '(1 << 63) | (1 << 45)' 8 'L2 entry .* past the end'
bad_entry v3.qcow2 l2 'e0 + 512' 8 'L2 entry .* misaligned'
bad_entry v3.qcow2 l2 '1 << 62 | (1 << 50)' 8 'compressed cluster at .* outside'
# Garbage compressed data: overwrite the start of the compressed
# cluster at 192k of mixed.qcow2 (its fourth L2 entry) with 0xff bytes,
# which is not valid deflate.  The clusters around it still read.
cp "$tmpdir/mixed.qcow2" "$tmpdir/bad.qcow2"
patch "$tmpdir/bad.qcow2" \
  "struct.unpack('>Q', data[l2 + 24:l2 + 32])[0] & ((1 << (62 - (cb - 8))) - 1)" \
  '(1 << 512) - 1' 64
t "$NBDKIT" -U - --filter=qcow2dec file "$tmpdir/bad.qcow2" \
  --run 'nbdsh -u "$uri" -c "
import errno
try:
    h.pread(512, 192 * 1024)
    raise AssertionError(\"garbage compressed data read\")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
assert h.pread(4, 0) == b\"\\x11\" * 4
assert h.pread(4, 512 * 1024) == b\"\\x23\" * 4
"' 2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "garbage compressed"; }
grep -q 'compressed cluster at .* does not inflate' "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "no inflate error"; }
echo "garbage compressed data: EIO"
