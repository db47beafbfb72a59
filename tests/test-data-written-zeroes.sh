#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The data plugin: a zero byte that the expression (or a client) writes
# allocates its 32 KiB page, which block status then reports as
# allocated zeroes ("zero", not "hole,zero"; qemu-img map: data true,
# zero true), also through the offset filter, as Debian's nbdkit 1.32
# does.  Runs of zeroes made by repetition or by one literal longer than
# a byte stay holes, and zeroing or trimming gives pages back.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh qemu-img

# map ARGS...: nbdinfo --map of the data plugin with ARGS.
map ()
{
  t "$NBDKIT" -U - "$@" --run 'nbdinfo --map "$uri"' |
    awk '{ print $1, $2, $4 }'
}

# The issue's command, as qemu-img map sees it.
out=$(t "$NBDKIT" -U - data '@65536 0' size=1M \
        --run 'qemu-img map -f raw --output=json "$nbd"')
echo "$out" | grep -q '"start": 65536, "length": 32768, .*"zero": true, "data": true' ||
  fail "a written zero byte is not allocated zeroes: $out"

for a in sparse zstd; do
  [ "$(map data '@65536 0' size=1M allocator=$a)" = "0 65536 hole,zero
65536 32768 zero
98304 950272 hole,zero" ] || fail "allocator=$a: $(map data '@65536 0' size=1M allocator=$a)"
done

# Through the offset filter: the same page, 4096 bytes earlier.
[ "$(map --filter=offset data '@65536 0' size=1M offset=4096)" = "0 61440 hole,zero
61440 32768 zero
94208 950272 hole,zero" ] || fail "offset filter: $(map --filter=offset data '@65536 0' size=1M offset=4096)"

# Bytes read from a script are stored as they are, zeroes too.
[ "$(map data '@65536 <(head -c 40000 /dev/zero)' size=1M)" = "0 65536 hole,zero
65536 65536 zero
131072 917504 hole,zero" ] || fail "<(script) of zeroes"

# Runs of zeroes from repetition or from one literal are holes.
for e in '@65536 0*100' '@65536 (0)*3' '@65536 0 0' '@65536 le32:0' \
         '@65536 "\x00\x00"'; do
  [ "$(map data "$e" size=1M)" = "0 1048576 hole,zero" ] ||
    fail "$e: $(map data "$e" size=1M)"
done

# A client writing zeroes into a hole allocates the page; trimming it
# gives the page back.
out=$(t "$NBDKIT" -U - data '' size=1M --run '
  nbdsh -u "$uri" -c "h.pwrite(bytes(512), 131072)"
  nbdinfo --map "$uri" | awk "{ print \$1, \$2, \$4 }"
  nbdsh -u "$uri" -c "h.trim(32768, 131072)"
  nbdinfo --map "$uri" | awk "{ print \$1, \$2, \$4 }"')
[ "$out" = "0 131072 hole,zero
131072 32768 zero
163840 884736 hole,zero
0 1048576 hole,zero" ] || fail "client writes of zeroes: $out"
echo "written zeroes are allocated"
