#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# memory allocator=sparse|malloc|malloc,mlock=true|zstd: each one
# serves what nbdcopy wrote into it (the same sha256 read back), reads,
# writes, trims and zeroes at odd offsets read back as a plain buffer
# would, and --map matches Debian's nbdkit on the same command (data
# placed on 1 MiB boundaries, which every page size divides).  A bad
# allocator= value is one clear error.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy nbdinfo sha256sum
debian_nbdkit=/usr/sbin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/bin/nbdkit
requires "$debian_nbdkit" --version

# A 16 MiB image: random data, a compressible run, holes between.
img="$tmpdir/disk.img"
truncate -s 16M "$img"
dd if=/dev/urandom of="$img" bs=1M count=2 seek=1 conv=notrunc status=none
yes 'compressible text ' | head -c 3M |
  dd of="$img" bs=1M seek=8 conv=notrunc status=none iflag=fullblock
dd if=/dev/urandom of="$img" bs=1M count=1 seek=15 conv=notrunc status=none
want="$(sha256sum < "$img")"

# A few requests at odd offsets, checked against a bytearray.
py='
import os
size = 16 << 20
ref = bytearray(size)
data = os.urandom(300000)
h.pwrite(data, 12345); ref[12345:12345 + len(data)] = data
h.zero(70000, 20000); ref[20000:90000] = bytes(70000)
h.trim(4096 * 3 + 1, 200000); ref[200000:200000 + 4096 * 3 + 1] = bytes(4096 * 3 + 1)
h.pwrite(b"x" * 5000, size - 5000); ref[size - 5000:] = b"x" * 5000
h.zero(4096, size - 4096 - 100); ref[size - 4196:size - 100] = bytes(4096)
for off in range(0, size, 1 << 20):
    assert h.pread(1 << 20, off) == ref[off:off + (1 << 20)], off
'

for a in sparse malloc malloc,mlock=true zstd; do
  # In, out, compare.
  out="$tmpdir/out.img"
  rm -f "$out"
  t "$NBDKIT" -U - memory 16M allocator="$a" --run "
    nbdcopy '$img' \"\$uri\" && nbdcopy \"\$uri\" '$out' &&
    nbdinfo --map \"\$uri\" > '$tmpdir/map-ours'" ||
    fail "allocator=$a: nbdcopy through the server failed"
  [ "$(sha256sum < "$out")" = "$want" ] ||
    fail "allocator=$a: the bytes read back differ from those written"

  t "$debian_nbdkit" -U - memory 16M allocator="$a" --run "
    nbdcopy '$img' \"\$uri\" &&
    nbdinfo --map \"\$uri\" > '$tmpdir/map-debian'" ||
    fail "allocator=$a: Debian's nbdkit failed"
  diff -u "$tmpdir/map-debian" "$tmpdir/map-ours" ||
    fail "allocator=$a: --map differs from Debian's nbdkit"

  t "$NBDKIT" -U - memory 16M allocator="$a" --run "nbdsh -u \"\$uri\" -c '$py'" ||
    fail "allocator=$a: odd-offset requests read back wrong"
  echo "allocator=$a: bytes and map ok"
done

# Bad values: one line naming the parameter, and exit 1.
for bad in nosuch malloc,mlock=maybe sparse,mlock=true; do
  status=0
  "$NBDKIT" memory 1M allocator="$bad" > /dev/null 2> "$tmpdir/err" ||
    status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "allocator=$bad: exit status $status, not 1"
  grep -q "memory: error: allocator=$bad: " "$tmpdir/err" ||
    fail "allocator=$bad: no clear error"
done
