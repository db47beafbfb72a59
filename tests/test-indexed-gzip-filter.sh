#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=indexed-gzip serves what gzip -d gives, read-only, through a
# seek-point index: the first server makes the index file, a second one
# reuses it unchanged; nbdcopy's and qemu-img's copies and random nbdsh
# reads match (one member, and many members with junk after them); the
# server fails writes, trims and zeroes with EPERM/EROFS.  Bad gzip
# input and damaged, foreign or stale index files refuse the connection
# with a clear error (no index left behind); damage met by a read after
# the index was made fails that read with EIO; parameters are checked.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_cmd gzip nbdsh nbdcopy nbdinfo qemu-img

raw="$tmpdir/disk.raw"
# A multiple of 512: qemu rounds an export's size up to a sector.
make_sample "$raw" $(( 3 * 1024 * 1024 + 1024 )) 1
gzip -c "$raw" > "$tmpdir/disk.gz"
idx="$tmpdir/disk.idx"
args=(--filter=indexed-gzip file "$tmpdir/disk.gz" gzip-index-path="$idx")

# --- Made, then reused -----------------------------------------------------
start_server "${args[@]}" gzip-index-span=128K
t nbdcopy --connections=4 "$uri" "$tmpdir/copy"
cmp "$raw" "$tmpdir/copy" || fail "nbdcopy's copy differs"
stop_server
[ -s "$idx" ] && [ ! -e "$idx.tmp" ] || fail "no index file (or a .tmp left)"
# About 32 KiB per 128K span, and more than a few points.
isize=$(stat -c %s "$idx")
[ "$isize" -gt $(( 10 * 32768 )) ] && [ "$isize" -lt $(( 40 * 32800 )) ] ||
  fail "index of $isize bytes for 24 spans"
sha=$(sha256sum < "$idx")
start_server "${args[@]}" gzip-index-span=1M
t qemu-img convert -f raw -O raw "$uri" "$tmpdir/qcopy"
cmp "$raw" "$tmpdir/qcopy" || fail "qemu-img's copy differs"
reads_match "$uri" "$raw"
stop_server
[ "$(sha256sum < "$idx")" = "$sha" ] || fail "the index file was rewritten"

# --- Many members, junk after them -------------------------------------------
split -b 200000 "$raw" "$tmpdir/piece."
for p in "$tmpdir"/piece.*; do gzip -c "$p"; done > "$tmpdir/multi.gz"
: | gzip -c >> "$tmpdir/multi.gz"
printf 'junk after the members' >> "$tmpdir/multi.gz"
start_server --filter=indexed-gzip file "$tmpdir/multi.gz" \
  gzip-index-path="$tmpdir/multi.idx" gzip-index-span=64K
t nbdcopy "$uri" "$tmpdir/multi.got"
cmp "$raw" "$tmpdir/multi.got" || fail "several members: not gzip -d's"
reads_match "$uri" "$raw"
stop_server
# An empty member alone: an empty export.
: | gzip -c > "$tmpdir/empty.gz"
size=$(t "$NBDKIT" -U - --filter=indexed-gzip file "$tmpdir/empty.gz" \
         gzip-index-path="$tmpdir/empty.idx" --run 'nbdinfo --size "$uri"')
[ "$size" = 0 ] || fail "empty: size $size"

# --- Bad gzip input: refused, no index made ----------------------------------
csize=$(stat -c %s "$tmpdir/disk.gz")
bad_gz ()
{
  local file="$1" regex="$2"
  rm -f "$tmpdir/bad.idx"
  bad_input "$regex" --filter=indexed-gzip file "$file" \
    gzip-index-path="$tmpdir/bad.idx"
  [ ! -e "$tmpdir/bad.idx" ] && [ ! -e "$tmpdir/bad.idx.tmp" ] ||
    fail "$file: an index was left behind"
}
bad_gz "$raw" 'indexed-gzip\[1\]: error: the compressed data is not valid gzip'
: > "$tmpdir/zero-length"
bad_gz "$tmpdir/zero-length" 'ends before the end of the gzip stream'
for n in 10 $(( csize / 2 )) $(( csize - 4 )); do
  head -c "$n" "$tmpdir/disk.gz" > "$tmpdir/trunc.gz"
  bad_gz "$tmpdir/trunc.gz" 'ends before the end of the gzip stream'
done
cp "$tmpdir/disk.gz" "$tmpdir/corrupt.gz"
printf '\x55\xaa\x55\xaa' |
  dd of="$tmpdir/corrupt.gz" bs=1 seek=$(( csize / 2 )) conv=notrunc status=none
bad_gz "$tmpdir/corrupt.gz" 'error: the compressed data is not valid gzip'

# --- Bad index files: refused, never rewritten -------------------------------
bad_idx ()
{
  local regex="$1" before
  before=$(sha256sum < "$tmpdir/bad.idx")
  bad_input "$regex" "${args[@]/#gzip-index-path=*/gzip-index-path=$tmpdir/bad.idx}"
  [ "$(sha256sum < "$tmpdir/bad.idx")" = "$before" ] ||
    fail "a bad index file was changed"
}
# flip FILE OFFSET: invert one byte.
flip ()
{
  /usr/bin/python3 -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1)
    f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))' "$1" "$2"
}
cp "$idx" "$tmpdir/bad.idx"; flip "$tmpdir/bad.idx" 20
bad_idx 'indexed-gzip\[1\]: error: gzip-index-path: .*the header is corrupt'
cp "$idx" "$tmpdir/bad.idx"; flip "$tmpdir/bad.idx" $(( isize / 2 ))
bad_idx 'the points are corrupt'
head -c $(( isize - 1 )) "$idx" > "$tmpdir/bad.idx"
bad_idx 'is truncated or corrupt'
head -c 100 "$raw" > "$tmpdir/bad.idx"
bad_idx 'is not an index file of this filter'
cp "$tmpdir/multi.idx" "$tmpdir/bad.idx"
bad_idx 'was made for another gzip file'
# A point whose fields are wrong though its CRCs are right.
cp "$idx" "$tmpdir/bad.idx"
/usr/bin/python3 - "$tmpdir/bad.idx" <<'PY'
import struct, sys, zlib
f = open(sys.argv[1], "r+b"); d = bytearray(f.read())
rec = 24 + 32768
d[64 + rec + 16:64 + rec + 20] = struct.pack("<i", 9)    # bits 9
pts = d[64:]
d[44:48] = struct.pack("<I", zlib.crc32(pts))
d[48:52] = struct.pack("<I", zlib.crc32(bytes(d[:48])))
f.seek(0); f.write(d)
PY
bad_idx 'point 1 is corrupt'

# --- Damage met after the index was made: EIO for those reads ---------------
cp "$tmpdir/disk.gz" "$tmpdir/later.gz"
start_server --filter=indexed-gzip file "$tmpdir/later.gz" \
  gzip-index-path="$tmpdir/later.idx" gzip-index-span=64K
t nbdinfo --size "$uri" > /dev/null
printf '\x55\xaa\x55\xaa\x55\xaa' |
  dd of="$tmpdir/later.gz" bs=1 seek=$(( csize / 2 )) conv=notrunc status=none
t nbdsh -u "$uri" -c - <<PY
import errno
data = open("$raw", "rb").read()
size = len(data)
bad = 0
for off in range(0, size, 65536):
    try:
        n = min(65536, size - off)
        ok = h.pread(n, off) == data[off:off + n]
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e
        ok = False
    bad += not ok
# The damage spoils some spans, never the first or the last.
assert 0 < bad < size // 65536 // 2, bad
assert h.pread(4096, 0) == data[:4096]
assert h.pread(4096, size - 4096) == data[-4096:]
PY
kill -0 "$server_pid" || fail "the server died"
stop_server

# --- Parameters ----------------------------------------------------------
refuses 'indexed-gzip: error: the gzip-index-path parameter is required' \
  --filter=indexed-gzip file "$tmpdir/disk.gz" || fail "no gzip-index-path"
refuses 'indexed-gzip: error: gzip-index-span: must be greater than 0' \
  "${args[@]}" gzip-index-span=0 || fail "gzip-index-span=0"
refuses 'indexed-gzip: error: gzip-index-span: could not parse size' \
  "${args[@]}" gzip-index-span=wide || fail "gzip-index-span=wide"
bad_input 'gzip-index-path: cannot create .*/no-such-dir/x.idx.tmp' \
  --filter=indexed-gzip file "$tmpdir/disk.gz" \
  gzip-index-path="$tmpdir/no-such-dir/x.idx"
