#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=lzip serves what lzip -d gives, read-only: nbdcopy's and
# qemu-img's copies and random nbdsh reads match the original for a
# single-member file, a multi-member file (lzip -b) and concatenated
# files with an empty member; the server fails writes, trims and zeroes
# with EPERM/EROFS.  Bad input (not lzip, empty, truncated, trailing
# data, a damaged trailer) refuses the connection with a clear error; a
# damaged member fails only the reads that need it, with EIO; the
# parameters are checked.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_cmd lzip nbdsh nbdcopy nbdinfo qemu-img

raw="$tmpdir/disk.raw"
# A multiple of 512: qemu rounds an export's size up to a sector.
make_sample "$raw" $(( 2 * 1024 * 1024 + 512 )) 1
lzip -c "$raw" > "$tmpdir/single.lz"
lzip -c -b 100KiB "$raw" > "$tmpdir/multi.lz"
members=$(lzip --list -v "$tmpdir/multi.lz" | awk 'NR == 2 { print $3 }')
[ "$members" -ge 5 ] || fail "lzip -b made $members members"

# --- Bytes: nbdcopy, qemu-img, random reads, refused writes ----------------
for f in single multi; do
  start_server --filter=lzip file "$tmpdir/$f.lz" lzip-max-depth=2
  t nbdcopy --connections=4 "$uri" "$tmpdir/copy"
  cmp "$raw" "$tmpdir/copy" || fail "$f: nbdcopy's copy differs"
  t qemu-img convert -f raw -O raw "$uri" "$tmpdir/qcopy"
  cmp "$raw" "$tmpdir/qcopy" || fail "$f: qemu-img's copy differs"
  reads_match "$uri" "$raw" 100
  stop_server
done

# cat a.lz b.lz, an empty member between, an unaligned size.
make_sample "$tmpdir/part2" 150001 2
: | lzip -c > "$tmpdir/empty.lz"
cat "$tmpdir/multi.lz" "$tmpdir/empty.lz" "$tmpdir/empty.lz" \
  <(lzip -c "$tmpdir/part2") > "$tmpdir/cat.lz"
lzip -dc "$tmpdir/cat.lz" > "$tmpdir/cat.expected"
start_server --filter=lzip file "$tmpdir/cat.lz"
t nbdcopy "$uri" "$tmpdir/cat.got"
cmp "$tmpdir/cat.expected" "$tmpdir/cat.got" ||
  fail "concatenated: not what lzip -d gives"
reads_match "$uri" "$tmpdir/cat.expected" 50
stop_server
size=$(t "$NBDKIT" -U - --filter=lzip file "$tmpdir/empty.lz" \
         --run 'nbdinfo --size "$uri"')
[ "$size" = 0 ] || fail "an empty member: size $size"

# --- Bad input -------------------------------------------------------------
csize=$(stat -c %s "$tmpdir/multi.lz")
bad_input 'lzip\[1\]: error: not an lzip file' --filter=lzip file "$raw"
: > "$tmpdir/zero-length"
bad_input 'lzip\[1\]: error: not an lzip file' \
  --filter=lzip file "$tmpdir/zero-length"
for n in 10 40 $(( csize / 2 )) $(( csize - 1 )); do
  head -c "$n" "$tmpdir/multi.lz" > "$tmpdir/trunc.lz"
  bad_input 'lzip\[1\]: error: the lzip file is truncated or corrupt' \
    --filter=lzip file "$tmpdir/trunc.lz"
done
{ cat "$tmpdir/multi.lz"; printf 'trailing data'; } > "$tmpdir/trail.lz"
bad_input 'lzip\[1\]: error: .*trailing data' \
  --filter=lzip file "$tmpdir/trail.lz"

# patch FILE OFFSET HEX: overwrite bytes of FILE.
patch ()
{
  printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# The last member's size field says the member is huge, then tiny.
cp "$tmpdir/multi.lz" "$tmpdir/msize.lz"
patch "$tmpdir/msize.lz" $(( csize - 2 )) '\x7f'
bad_input 'member size of' --filter=lzip file "$tmpdir/msize.lz"
cp "$tmpdir/multi.lz" "$tmpdir/msize.lz"
patch "$tmpdir/msize.lz" $(( csize - 8 )) '\x01\x00\x00\x00\x00\x00\x00\x00'
bad_input 'member size of 1\)' --filter=lzip file "$tmpdir/msize.lz"
# A data size of 2^63 - 1 in the last trailer: the sum overflows; 2^40:
# a member too large for lzip-max-block.
cp "$tmpdir/multi.lz" "$tmpdir/dsize.lz"
patch "$tmpdir/dsize.lz" $(( csize - 16 )) '\xff\xff\xff\xff\xff\xff\xff\x7f'
bad_input 'more than 2\^63 bytes' --filter=lzip file "$tmpdir/dsize.lz"
patch "$tmpdir/dsize.lz" $(( csize - 16 )) '\x00\x00\x00\x00\x00\x01\x00\x00'
bad_input 'largest member is 1099511627776 bytes' \
  --filter=lzip file "$tmpdir/dsize.lz"
bad_input 'largest member is [0-9]+ bytes, more than lzip-max-block \(1000 bytes\)' \
  --filter=lzip file "$tmpdir/multi.lz" lzip-max-block=1000

# Damage member 3's data (its CRC notices) and member 5's stored data
# size (one more byte than it holds): reads of those members fail with
# EIO, every other member reads right, again and again.
read -r m3pos m3size < <(lzip --list -vv "$tmpdir/multi.lz" |
  awk 'NF == 5 && $1 == 3 { print $4, $5 }')
read -r m5pos m5size < <(lzip --list -vv "$tmpdir/multi.lz" |
  awk 'NF == 5 && $1 == 5 { print $4, $5 }')
cp "$tmpdir/multi.lz" "$tmpdir/damaged.lz"
patch "$tmpdir/damaged.lz" $(( m3pos + m3size / 2 )) '\x55\xaa\x55\xaa'
/usr/bin/python3 - "$tmpdir/damaged.lz" $(( m5pos + m5size - 16 )) <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    n = struct.unpack("<Q", f.read(8))[0]
    f.seek(int(sys.argv[2]))
    f.write(struct.pack("<Q", n + 1))
PY
ranges=$(lzip --list -vv "$tmpdir/multi.lz" |
  awk 'NF == 5 && $1 ~ /^[0-9]+$/ { printf "(%s,%s),", $2, $3 }')
start_server --filter=lzip file "$tmpdir/damaged.lz" lzip-max-depth=1
t nbdsh -u "$uri" -c - <<PY
import errno
data = open("$raw", "rb").read()
ranges = [$ranges]
assert h.get_size() == len(data) + 1
for attempt in range(2):
    for i, (pos, size) in enumerate(ranges, start=1):
        if i in (3, 5):
            try:
                h.pread(100, pos + size // 2)
            except nbd.Error as e:
                assert e.errnum == errno.EIO, (i, e)
            else:
                raise AssertionError("damaged member %d was read" % i)
        else:
            # Member 5 claims one byte more: later members move up.
            at = pos + 1 if i > 5 else pos
            assert h.pread(size, at) == data[pos:pos + size], i
PY
kill -0 "$server_pid" || fail "the server died"
stop_server

# --- Parameters ------------------------------------------------------------
refuses 'lzip: error: lzip-max-depth: must be at least 1' \
  --filter=lzip file "$tmpdir/multi.lz" lzip-max-depth=0 ||
  fail "lzip-max-depth=0"
refuses 'lzip: error: .*lzip-max-depth' \
  --filter=lzip file "$tmpdir/multi.lz" lzip-max-depth=many ||
  fail "lzip-max-depth=many"
refuses 'lzip: error: lzip-max-block: could not parse size' \
  --filter=lzip file "$tmpdir/multi.lz" lzip-max-block=big ||
  fail "lzip-max-block=big"
