#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit -v -D data.AST=1 data EXPR prints the parsed expression in the
# debug log, between "BEGIN AST" and "END AST": one node a line,
# indented by nesting, with adjacent bytes joined into one string, as
# Debian's nbdkit 1.32 shows it (the lines that both print are checked
# against both servers).  Without the flag nothing is printed, and the
# flag is known (no "has no debug flag" warning).
source "$(dirname "$0")/functions.sh"

# ast SERVER EXPR: the AST lines, without the log prefix.
ast ()
{
  t "$1" -v -D data.AST=1 data "$2" v='1 2' --run true 2>&1 |
    sed -n '/BEGIN AST/,/END AST/s/^nbdkit: \(data: \)\{0,1\}debug: //p'
}

out=$(ast "$NBDKIT" '0 1 2 3 @0x1fe 0x55 0xaa')
expected='(
    "\x00\x01\x02\x03"
    @510
    "U\xaa"
)'
[ "$(echo "$out" | sed '1d;$d')" = "$expected" ] ||
  fail "unexpected AST:
$out"
echo "$out" | grep -q '^BEGIN AST (-D data.AST=1), 512 bytes$' ||
  fail "no BEGIN AST line with the size: $out"
[ "$(echo "$out" | tail -n1)" = "END AST" ] || fail "no END AST line"
if [ -x /usr/bin/nbdkit ]; then
  deb=$(ast /usr/bin/nbdkit '0 1 2 3 @0x1fe 0x55 0xaa')
  [ "$(echo "$deb" | sed '1d;$d')" = "$expected" ] ||
    fail "Debian's nbdkit shows it otherwise:
$deb"
fi

# Groups, repeats, slices, offsets, words, scripts and variables.
out=$(ast "$NBDKIT" '(1 2)*3 @^512 "hi\x01" le16:0x1234 (5 6)[1:2] @+3 @-1 7*4 <(printf ab) $v')
for line in '    (' '            "\x01\x02"' '    ) *3' '    @^512' \
            '    "hi\x014\x12"' '    )[1:2]' '    @+3' '    @-1' \
            '    fill(7*4)' '    <(printf ab) (2 bytes)' '        "\x01\x02"'; do
  echo "$out" | grep -qxF -- "$line" || fail "no line '$line' in:
$out"
done

# Without the flag, no AST; with it, no warning about the flag.
t "$NBDKIT" -v data '1 2' --run true 2>&1 | grep -q 'BEGIN AST' &&
  fail "the AST is printed without -D data.AST=1"
t "$NBDKIT" -v -D data.AST=1 data '1 2' --run true 2>&1 |
  grep -i 'no debug flag' && fail "-D data.AST=1 is not a known flag"
echo "-D data.AST=1 shows the parsed expression"
