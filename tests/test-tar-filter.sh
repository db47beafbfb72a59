#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=tar tar-entry=NAME serves one member of a tar archive made
# by GNU tar in each of its formats (gnu with an 'L' long name, pax
# with a path= extended header, ustar with a prefix-split name, v7):
# the bytes, the size and the map are the member's, writes land inside
# it and nowhere else, a GNU base-256 size is read; damaged, truncated
# and hostile archives, and tar-limit=, make the connection fail with
# an error naming the cause.  Debian's nbdkit is compared on the same
# commands, except for a GNU long name, where nbdkit 1.32 serves the
# wrong bytes (it takes the 'L' header's block for the member's).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd tar
requires tar --version

cd "$tmpdir"
mkdir -p src/d
make_pattern src/d/disk.img $((1024 * 1024))
/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 391)' \
  > src/d/small.img
long="d/$(printf 'l%.0s' $(seq 1 80))/$(printf 'n%.0s' $(seq 1 70)).img"
mkdir -p "src/$(dirname "$long")"
head -c 70000 src/d/small.img > "src/$long"
ln -s small.img src/d/link
for fmt in gnu pax ustar; do
  tar -C src -cf "$fmt.tar" --format=$fmt d
done
tar -C src -cf v7.tar --format=v7 d/small.img d/disk.img
tar -tf gnu.tar | grep -qx "$long" || fail "the test archive lacks $long"

# serve ARCHIVE ENTRY: nbdcopy the member out and compare its bytes.
serve ()
{
  t "$NBDKIT" -U - file "$1" --filter=tar tar-entry="$2" \
    --run 'nbdinfo --size "$uri" && nbdcopy "$uri" out.img' > size.out ||
    fail "$1: serving $2 failed"
  [ "$(cat size.out)" -eq "$(stat -c %s "src/$2")" ] ||
    fail "$1: $2: size $(cat size.out)"
  cmp out.img "src/$2" || fail "$1: $2: wrong bytes"
}
for fmt in gnu pax ustar; do
  serve $fmt.tar d/small.img
  serve $fmt.tar d/disk.img
  serve $fmt.tar "$long"
done
serve v7.tar d/small.img
serve v7.tar d/disk.img

# Same command, same bytes and map as Debian's nbdkit (which runs GNU
# tar to find the member), and for writes the same archive afterwards.
compare_own tar-pax-read read file pax.tar --filter=tar tar-entry=d/disk.img
compare_own tar-pax-long read file pax.tar --filter=tar tar-entry="$long"
compare_own tar-ustar-read read file ustar.tar --filter=tar tar-entry=d/disk.img
compare_own tar-gnu-read read file gnu.tar --filter=tar tar-entry=d/disk.img
cp pax.tar pax.tar.orig
state_files=("$tmpdir/pax.tar")
compare_own tar-pax-write write file pax.tar --filter=tar tar-entry=d/disk.img
state_files=()

# Writes land in the member, and the rest of the archive is intact:
# GNU tar still reads it, and only disk.img changed.
cp gnu.tar w.tar
t "$NBDKIT" -U - file w.tar --filter=tar tar-entry=d/disk.img --run '
nbdsh -u "$uri" -c "
import errno
h.pwrite(b\"X\" * 1000, 1024 * 1024 - 1000)
h.zero(4096, 0)
h.set_strict_mode(0)
try:
    h.pwrite(b\"Y\", 1024 * 1024)
    raise AssertionError(\"write past the member succeeded\")
except nbd.Error as e:
    assert e.errnum in (errno.ENOSPC, errno.EINVAL), e
"' || fail "writing into the member failed"
mkdir -p x && tar -C x -xf w.tar || fail "GNU tar cannot read the written archive"
cmp x/d/small.img src/d/small.img && cmp "x/$long" "src/$long" ||
  fail "a write reached another member"
/usr/bin/python3 - x/d/disk.img src/d/disk.img <<'PY' || fail "the written member is wrong"
import sys
got = open(sys.argv[1], "rb").read()
want = bytearray(open(sys.argv[2], "rb").read())
want[0:4096] = bytes(4096)
want[-1000:] = b"X" * 1000
assert got == bytes(want)
PY

# GNU base-256 size field (members of 8 GiB and more): a hand-made
# header for a 9 GiB member, in a sparse file.
/usr/bin/python3 - <<'PY'
import struct
size = 9 << 30
h = bytearray(512)
h[0:7] = b"big.img"
h[100:108] = b"0000644\0"
h[108:116] = b"0000000\0"
h[116:124] = b"0000000\0"
h[124:136] = b"\x80" + size.to_bytes(11, "big")
h[136:148] = b"00000000000\0"
h[156:157] = b"0"
h[257:265] = b"ustar  \0"
h[148:156] = b" " * 8
h[148:156] = b"%06o\0 " % sum(h)
with open("big.tar", "wb") as f:
    f.write(h)
    f.truncate(512 + size + 1024)
PY
t "$NBDKIT" -U - file big.tar --filter=tar tar-entry=big.img \
  --run 'nbdinfo --size "$uri"' > size.out || fail "big.tar failed"
[ "$(cat size.out)" -eq $((9 << 30)) ] || fail "base-256 size: $(cat size.out)"

# bad ARCHIVE ENTRY REGEX [ARGS]: the connection fails, and the server
# says why.
bad ()
{
  local archive="$1" ent="$2" regex="$3"
  shift 3
  expect_fail t "$NBDKIT" -U - file "$archive" --filter=tar tar-entry="$ent" \
    "$@" --run 'nbdinfo --size "$uri"' > /dev/null 2> bad.err ||
    fail "$archive: serving $ent succeeded"
  grep -Eq "^nbdkit: tar\[1\]: error: tar: $regex" bad.err ||
    { cat bad.err; fail "$archive: $ent: no error /$regex/"; }
}
bad gnu.tar d/missing.img "tar-entry d/missing.img not found in the archive"
bad gnu.tar d/ "tar-entry d/ is not a regular file \(type '5'\)"
bad gnu.tar d/link "tar-entry d/link is not a regular file \(type '2'\)"
head -c 100000 /dev/zero | tr '\0' 'j' > junk.tar
bad junk.tar d/small.img "not a tar archive"
: > empty.tar
bad empty.tar d/small.img "tar-entry d/small.img not found: the archive ends"
head -c 100 gnu.tar > short.tar
bad short.tar d/small.img "header at offset 0 is beyond the end"
# Truncated inside the member, and inside a member before it.
head -c 200000 gnu.tar > trunc.tar
bad trunc.tar d/disk.img "(tar-entry d/disk.img extends beyond|the member at offset [0-9]+ extends beyond)"
# The archive cut at every block before the member's end: each fails
# with an error (never a crash, never wrong data).
end="$(tar -tvR -f gnu.tar | awk '/d\/disk.img$/ { sub(":", "", $2); print ($2 + 1) * 512 + 1048576 }')"
for (( n = 512; n < end; n += 512 * 97 )); do
  head -c "$n" gnu.tar > cut.tar
  bad cut.tar d/disk.img ".*(not found|extends beyond|beyond the end)"
done
# A flipped bit in a header.
cp gnu.tar flip.tar
printf '\x01' | dd of=flip.tar bs=1 seek=$((512 + 20)) conv=notrunc status=none
bad flip.tar d/disk.img "bad header checksum at offset 512"
# Hand-made hostile headers: a size that is not a number, a pax record
# whose length runs past its data, an 'L' name too big to read.
/usr/bin/python3 - <<'PY'
def header(name, size_field, typeflag, magic=b"ustar\x0000"):
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[124:136] = size_field
    h[156:157] = typeflag
    h[257:265] = magic
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)
def octal(n):
    return b"%011o\0" % n
def write(path, *blocks):
    with open(path, "wb") as f:
        for b in blocks:
            f.write(b + bytes(-len(b) % 512))
        f.write(bytes(1024))
write("badsize.tar", header(b"a.img", b"12345678901x", b"0"))
rec = b"99 path=a.img\n"
write("badpax.tar", header(b"pax", octal(len(rec)), b"x"), rec,
      header(b"a.img", octal(0), b"0"))
rec = b"29 size=99999999999999999999\n"
assert len(rec) == 29
write("hugepax.tar", header(b"pax", octal(len(rec)), b"x"), rec,
      header(b"a.img", octal(0), b"0"))
write("hugelong.tar", header(b"././@LongLink", octal(1 << 30), b"L",
      b"ustar  \0"))
write("neg.tar", header(b"a.img", b"\xff" * 12, b"0"))
rec = b"25 GNU.sparse.name=a.img\n"
assert len(rec) == 25
write("sparse.tar", header(b"pax", octal(len(rec)), b"x"), rec,
      header(b"GNUSparseFile/a.img", octal(0), b"0"))
PY
bad badsize.tar a.img "bad size field in the header at offset 0"
bad badpax.tar a.img "bad pax extended header record"
bad hugepax.tar a.img "bad pax extended header record"
bad hugelong.tar a.img "long name at offset 512 is too large"
bad neg.tar a.img "bad size field"
bad sparse.tar a.img "tar-entry a.img is a sparse file"

# tar-limit: the member's header must lie in the first SIZE bytes.
hdr="$(tar -tvR -f gnu.tar | awk '/d\/disk.img$/ { sub(":", "", $2); print $2 * 512 }')"
bad gnu.tar d/disk.img "tar-entry d/disk.img not found in the first $hdr bytes" \
  tar-limit="$hdr"
t "$NBDKIT" -U - file gnu.tar --filter=tar tar-entry=d/disk.img \
  tar-limit=$((hdr + 512)) --run 'nbdinfo --size "$uri"' > /dev/null ||
  fail "tar-limit just past the header refused"

# Parameters.
param ()
{
  refuses "$1" --filter=tar file gnu.tar "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
param '^nbdkit: tar: error: tar-entry: you must supply'
param '^nbdkit: tar: error: tar-entry: only one' tar-entry=a tar-entry=b
param '^nbdkit: tar: error: tar-entry: the name must not be empty' tar-entry=
param '^nbdkit: tar: error: tar-limit: could not parse' tar-entry=a tar-limit=x
param "^nbdkit: file: error: unknown parameter 'tar-bogus'" tar-entry=a tar-bogus=1
t "$NBDKIT" -U - file gnu.tar --filter=tar tar-entry=d/small.img tar=gtar \
  --run 'nbdinfo --size "$uri"' > /dev/null || fail "tar=gtar refused"
finish
