#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# @PATH (nbdkit 1.46): the parameters in a file, one per line, mixed
# with those on the command line in order.  Comments, blank lines and
# the blanks around a line are skipped; a value keeps its inner spaces
# and = signs; a file can name another, relative to itself; a missing
# file is passed on as a value, a file that includes itself and a NUL
# byte are clean errors.
# Debian's nbdkit 1.32.5 has no @PATH, so there is nothing to compare.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

mkdir "$tmpdir/sub"
# The data plugin's bytes show every parameter arrived intact: "1 2 3"
# is one value with its spaces; size= comes from the nested file.
printf '%s\n' '# disk contents' '' '   data=1 2 3  ' '@sub/more' \
  > "$tmpdir/params"
printf '%s\n' '  # from the nested file' 'size=8' > "$tmpdir/sub/more"
read_back ()
{
  t "$NBDKIT" "$@" --run 'nbdsh -u "$uri" -c "
print(h.get_size(), list(h.pread(h.get_size(), 0)))"'
}
[ "$(read_back data @"$tmpdir/params")" = "8 [1, 2, 3, 0, 0, 0, 0, 0]" ] ||
  fail "@FILE: $(read_back data @"$tmpdir/params")"
# In order with the command line: the later size= wins, as it would
# on the command line; a parameter before the file is kept.
out="$(read_back data allocator=sparse @"$tmpdir/params" size=4)"
[ "$out" = "4 [1, 2, 3, 0]" ] || fail "@FILE then size=4: $out"
# Relative to the working directory on the command line.
out="$(cd "$tmpdir" && read_back data @params)"
[ "$out" = "8 [1, 2, 3, 0, 0, 0, 0, 0]" ] || fail "relative @params: $out"
# A lone @ is an ordinary value (here the data plugin's magic key...
# which does not parse as data): it is not taken as a file.
"$NBDKIT" -U - data @ --run true 2> "$tmpdir/err" &&
  fail "data @ was accepted"
grep -q "@:" "$tmpdir/err" && fail "a lone @ was read as a file"

# A missing file is an ordinary value: the plugin refuses it as a size.
refuses "@$tmpdir/nosuch" memory @"$tmpdir/nosuch" || fail "missing @FILE"
# A value starting with @ is a parameter file only if that file
# exists: the data plugin's "@OFFSET BYTES..." expressions (nbdkit 1.32
# syntax) still reach the plugin; in a file, too.
out="$(read_back data '@2 7 8' size=4)"
[ "$out" = "4 [0, 0, 7, 8]" ] || fail "data '@2 7 8': $out"
printf '%s\n' '@1 9' 'size=3' > "$tmpdir/expr"
out="$(read_back data @"$tmpdir/expr")"
[ "$out" = "3 [0, 9, 0]" ] || fail "'@1 9' in a parameter file: $out"
mkdir "$tmpdir/with space"
echo 'size=2' > "$tmpdir/with space/p"
out="$(read_back data 5 @"$tmpdir/with space/p")"
[ "$out" = "2 [5, 0]" ] || fail "a parameter file whose path has a blank: $out"
echo '@loop' > "$tmpdir/loop"
refuses "nest deeper than 8" memory @"$tmpdir/loop" ||
  fail "a self-including @FILE"
printf 'size=1M\nx=\0y\n' > "$tmpdir/nul"
refuses "^nbdkit: @$tmpdir/nul:2: the line contains a NUL byte$" \
  memory @"$tmpdir/nul" || fail "a NUL in @FILE"
# An unknown key from a file is refused by the plugin as on the
# command line.
echo 'nokey=1' > "$tmpdir/bad"
expect_fail "$NBDKIT" -U - memory 1M @"$tmpdir/bad" --run true \
  2> "$tmpdir/err" || fail "a bad key from @FILE was accepted"
grep -q nokey "$tmpdir/err" || fail "the bad key is not named"
exit 0
