#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The extent helpers of the filter API, through Debian's filters that
# call them: blocksize and swab use nbdkit_extents_aligned, cow and
# checkwrite use nbdkit_extents_full.  Over the file plugin on a sparse
# file with data at unaligned places, each gives the same nbdinfo --map
# as Debian's own nbdkit running the same command; and checkwrite (which
# asks for the full map to check a zero request) accepts zeroing a hole
# and refuses zeroing data, as it does under Debian's nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-blocksize-filter.so"

disk="$tmpdir/disk.raw"
truncate -s 1M "$disk"
printf 'abc' | dd of="$disk" bs=1 seek=1001 conv=notrunc status=none
head -c 20000 /dev/urandom |
  dd of="$disk" bs=1 seek=300000 conv=notrunc status=none
head -c 4096 /dev/zero |
  dd of="$disk" bs=1 seek=$((600 * 1024)) conv=notrunc status=none

for f in "blocksize minblock=65536" "blocksize minblock=4096" \
         "swab swab-bits=32" cow checkwrite; do
  set -- $f
  name=$1
  shift
  args=(-U - --filter="$fdir/nbdkit-$name-filter.so" file "$disk" "$@")
  t "$NBDKIT" "${args[@]}" --run 'nbdinfo --map "$uri"' > "$tmpdir/ours" ||
    fail "$f: nbdinfo --map failed"
  t /usr/bin/nbdkit "${args[@]}" --run 'nbdinfo --map "$uri"' \
    > "$tmpdir/debian"
  diff -u "$tmpdir/debian" "$tmpdir/ours" ||
    fail "$f: the map differs from Debian's nbdkit"
  # A map with holes, or the helpers were not really asked.
  grep -q hole "$tmpdir/ours" || fail "$f: the map has no hole"
done

# checkwrite: zeroing a hole is a no-op, zeroing data is a mismatch.
for server in "$NBDKIT" /usr/bin/nbdkit; do
  t "$server" -U - --filter="$fdir/nbdkit-checkwrite-filter.so" \
    file "$disk" --run 'nbdsh -u "$uri" -c "
h.zero(65536, 131072)
try:
    h.zero(4096, 0)
    raise SystemExit(\"zeroing data was accepted\")
except nbd.Error as e:
    print(\"refused:\", e.string)
"' || fail "checkwrite under $server: zero checks went wrong"
done
