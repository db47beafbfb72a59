#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=xz fails cleanly on bad input, and the server lives on: a
# file that is not xz, an empty file, a truncated file and a file with
# a damaged index are refused when a client connects (with a reason in
# the log); a damaged block (its stored data or its check) fails only
# the reads that need that block, with EIO, while the other blocks read
# back right; a block header that claims a wrong size fails too.
source "$(dirname "$0")/functions.sh"
requires_cmd xz nbdsh nbdinfo

data="$tmpdir/data.img"
/usr/bin/python3 -c '
import random, sys
sys.stdout.buffer.write(random.Random(3).randbytes(1 << 20))
' > "$data"
good="$tmpdir/good.xz"
# -T2: threaded xz stores both sizes in every block header.
xz -T2 -c --block-size=65536 "$data" > "$good"

# block_field N COLUMN: a column of block N in xz --robot --list -vv
# (5: compressed offset, 7: total compressed size).
block_field ()
{
  xz --robot --list -vv "$good" |
    awk -v n="$1" -v c="$2" '$1 == "block" && $4 == n { print $c }'
}

# patch FILE OFFSET: flip the bits of one byte of FILE.
patch ()
{
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0xff]))
PY
}

# refused FILE REGEX: connecting fails, the log matches REGEX, and the
# server still answers a second client the same way.
refused ()
{
  local f="$1" regex="$2"
  start_server --filter=xz file "$f"
  for i in 1 2; do
    t nbdinfo "$uri" > "$tmpdir/out" 2>&1 &&
      fail "$f: a client could connect"
  done
  kill -0 "$server_pid" || fail "$f: the server died"
  stop_server
  "$NBDKIT" -U - --filter=xz file "$f" --run 'nbdinfo "$uri"' \
    > "$tmpdir/log" 2>&1 && fail "$f: nbdinfo succeeded"
  grep -Eq "$regex" "$tmpdir/log" ||
    fail "$f: log does not match /$regex/: $(cat "$tmpdir/log")"
}

cp "$data" "$tmpdir/plain.img"
refused "$tmpdir/plain.img" "xz.*not an xz file"
: > "$tmpdir/empty.xz"
refused "$tmpdir/empty.xz" "xz.*(not an xz file|truncated)"
for n in 5 100 $(( $(stat -c %s "$good") - 1 )); do
  head -c "$n" "$good" > "$tmpdir/trunc.xz"
  refused "$tmpdir/trunc.xz" "xz.*(truncated|corrupt|not an xz)"
done
# The index sits just before the 12-byte stream footer.
cp "$good" "$tmpdir/index.xz"
patch "$tmpdir/index.xz" $(( $(stat -c %s "$good") - 20 ))
refused "$tmpdir/index.xz" "xz.*corrupt"

# Damage the middle of block 5's data (random data is stored, so only
# the CRC64 check can notice), then the check of block 9 itself.
b5=$(block_field 5 5) b9=$(block_field 9 5)
[ -n "$b5" ] && [ -n "$b9" ] || fail "no block 5 or 9 in $good"
cp "$good" "$tmpdir/data.xz"
patch "$tmpdir/data.xz" $(( $(block_field 5 5) + $(block_field 5 7) / 2 ))
patch "$tmpdir/data.xz" $(( $(block_field 9 5) + $(block_field 9 7) - 1 ))
start_server --filter=xz file "$tmpdir/data.xz"
t nbdsh -u "$uri" -c - <<PY
import errno
data = open("$data", "rb").read()
def bad(off, n):
    try:
        h.pread(n, off)
    except nbd.Error as ex:
        assert ex.errnum == errno.EIO, ex
    else:
        raise AssertionError("read of a damaged block at %d succeeded" % off)
for attempt in range(2):
    bad(4 * 65536, 512)
    bad(4 * 65536 - 100, 200)        # straddles blocks 4 and 5
    bad(8 * 65536 + 65535, 1)
    for blk in (0, 3, 5, 7, 9, 15):
        off = blk * 65536
        assert h.pread(65536, off) == data[off:off + 65536], blk
PY
stop_server

# A block header whose stored uncompressed size disagrees with the
# index: threaded xz writes both sizes into every block header; make
# block 2 claim one byte more than it holds (the header CRC32 is
# recomputed, so only the size check can catch it).
cp "$good" "$tmpdir/size.xz"
/usr/bin/python3 - "$tmpdir/size.xz" "$(block_field 2 5)" <<'PY'
import sys, zlib, struct
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off)
    size = (f.read(1)[0] + 1) * 4
    f.seek(off)
    h = bytearray(f.read(size))
    flags = h[1]
    assert flags & 0x80, "no uncompressed size in the header"
    pos = 2
    if flags & 0x40:                  # skip the compressed size
        while h[pos] & 0x80:
            pos += 1
        pos += 1
    # The uncompressed size 65536 as a varint is 80 80 04: make it 65537.
    assert h[pos:pos + 3] == b"\x80\x80\x04", h[pos:pos + 3].hex()
    h[pos] = 0x81
    h[-4:] = struct.pack("<I", zlib.crc32(bytes(h[:-4])))
    f.seek(off)
    f.write(h)
PY
start_server --filter=xz file "$tmpdir/size.xz"
t nbdsh -u "$uri" -c - <<PY
import errno
data = open("$data", "rb").read()
try:
    h.pread(100, 65536 + 5)
except nbd.Error as ex:
    assert ex.errnum == errno.EIO, ex
else:
    raise AssertionError("block with a wrong size in its header was read")
assert h.pread(100, 0) == data[:100]
assert h.pread(100, 2 * 65536) == data[2 * 65536:2 * 65536 + 100]
PY
stop_server
