#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The data plugin against Debian's nbdkit 1.32 data plugin: for each
# command below, the same size and flags (nbdinfo --json), the same map
# (nbdinfo --map) and the same bytes (sha256 of nbdcopy's copy, with
# and without extents), then, for a few, the same results for writes,
# zeroes and trims read back.  Debian's nbdkit and ours keep the bytes
# in 32 KiB map pages (ours widens its 4 KiB pages' extents to match),
# and a page that was written only with zeroes is "zero" but not a
# "hole" in both.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires test -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-data-plugin.so

f="$tmpdir/file"
printf 'abcdefghij' > "$f"

exprs=(
  '0 1 2 3 @0x1fe 0x55 0xaa'
  '0 1 2 3 @^0x200 @-2 le16:0xaa55'
  '@0x1000'
  '1 @0'
  '( 0x55 0xAA )*2048'
  '1 2 3 -> \x \x \x'
  '"a\x41\n\"\\b\t\e"'
  '(1 2)[1:] (1 2 3 4)[:2] (5 6)[:] 7[0:1]'
  '1*2*3 2 * 4'
  '0x10 010 10 0X1f 0xFF 0377 255'
  'be64:0xffffffffffffffff le32:0x12345678 be16:0x102 le64:1 be32:0x80000000 le16:0'
  '( 0x55 0xAA ) -> \boot ( @0x1fe \boot ) -> \sector \sector \sector'
  '(1 -> \a \a \a (\a)*2) 9'
  '(@4096 1) @0 0 0'
  '1 @40000 1 1 1 @70000 1 @^65536 @-1 1'
  '@16777216 1 @^1048576'
  '(1 @1048576)*5 2 @8388608 3'
  '((1 2 @^8) (@+3 4)*2)*3 @-1 9'
  '(@^4096 1 @-1 2)*0 3'
  '(1)*1000000000000[5:7]'
  '(0x55 0xaa)*1000000[3:100003]'
  '@+100 @-50 1 @^16'
  '(("ab")*3 @1 "X")*2'
  '"Hello"*2000'
  '1 # a comment
   2 # another (with a paren
   (3 # in a group
    4) 5'
  "<$f @^512 <$f[2:5]*3 @^512 (<$f)[1:4]"
  '<(echo hi; echo there)*3'
  '<( i=0; while :; do printf "%04d" $i; i=$((i+1)); done )[:32768]'
)
for i in "${!exprs[@]}"; do
  compare "data-expr-$i" read data "${exprs[$i]}"
done

compare data-var read data '$v*2 @^32768' v='1 2'
compare data-var-nested read data '$a $b' a='1 $b' b='(2 3)*2'
export DATA_T_VAR='7 8'
compare data-env read data '$DATA_T_VAR*3'
compare data-size-extend read data '1 2 3' size=1M
compare data-size-cut read data '"Hello"*2000' size=8192
compare data-size-zero read data '1 2 3' size=0
compare data-empty read data ''
compare data-base64 read data base64=MTIz size=1M
compare data-base64-pad read data base64='aGVsbG8gbmJka2l0IHVzZXI='
compare data-raw read data raw='Hello, world!'
compare data-raw-size read data raw=hello size=100000
for a in sparse malloc zstd; do
  compare "data-allocator-$a" read data '(1 @40000 2)*3' allocator=$a
done
# (Not zstd: Debian's zstd store also keeps, as allocated zeroes, the
# pages that the gaps of a repeated group leave empty.)
for a in sparse malloc; do
  compare "data-allocator-$a-write" write data '(1 @40000 2)*30' \
    allocator=$a size=1M
done
compare data-write write data '0 1 2 3 @0x1fe 0x55 0xaa' size=1M
compare data-write-readonly write -r data '(0x55 0xaa)*300000'

# Pages written with zeroes are allocated; runs of zeroes made by
# repetition, or by a literal of more than one byte, are holes.
zexprs=(
  '</dev/zero[:100000] 1'
  '@65536 0'
  '1 @^65536 0'
  '@65536 "\x00" @+40000 le32:0 @+40000 0 0 @+40000 (0)*10'
  '@65536 0 @65537 0*10'
  '@65536 (1)*100000 @65536 0*40000'
)
for i in "${!zexprs[@]}"; do
  for a in sparse zstd; do
    compare "data-zero-pages-$i-$a" read data "${zexprs[$i]}" size=1M \
      allocator=$a
  done
done
compare data-zero-pages-offset read --filter=offset data '1 @^65536 0' \
  size=1M offset=4096

# Debian's nbdkit writes every byte of a huge repeat before cutting it
# to size= (this one takes it minutes); ours renders only what fits.
out=$(t "$NBDKIT" -U - data '(0x55)*1000000000000' size=1M \
        --run 'nbdinfo --size "$uri"; nbdcopy "$uri" - | sha256sum')
want=$(printf '%s\n%s  -' 1048576 \
         "$(head -c 1048576 /dev/zero | tr '\0' '\125' | sha256sum | cut -d' ' -f1)")
[ "$out" = "$want" ] || note_failure data-size-huge "got: $out"
finish
