#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad parameters and hostile data expressions: each makes the server
# exit with status 1 (never a crash, never a hang, never an allocation
# that the export does not need) after one error line that names the
# plugin and the parameter at fault.
source "$(dirname "$0")/functions.sh"

# check REGEX ARGS...: "nbdkit data ARGS" fails with status 1 within the
# time limit, printing one line that matches REGEX.
check ()
{
  local regex="$1" status=0
  shift
  timeout 20 "$NBDKIT" -U - data "$@" --run true \
    > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
  [ "$status" -eq 1 ] ||
    fail "data $*: exit status $status, expected 1: $(cat "$tmpdir/err")"
  [ "$(wc -l < "$tmpdir/err")" -eq 1 ] ||
    fail "data $*: expected one error line, got: $(cat "$tmpdir/err")"
  grep -Eq "^nbdkit: data: error: $regex" "$tmpdir/err" ||
    fail "data $*: error does not match /$regex/: $(cat "$tmpdir/err")"
}

# Parameters.
check "exactly one of data=, raw= or base64="
check "raw: only one of" '1' raw=a
check "data: only one of" base64=YQ== data=1
check "unknown parameter 'foo.bar'" '1' foo.bar=1
check "unknown parameter 'x-y'" '1' x-y=1
check "size: " '1' size=-1
check "size: " '1' size=1Q
check "allocator=bogus: " '1' allocator=bogus
check "allocator=malloc,mlock=maybe: " '1' allocator=malloc,mlock=maybe
check "base64: invalid" base64='!!!'
check "base64: invalid" base64='YQ=x'
check "base64: invalid" base64='Y'

# Malformed expressions: "data parameter: ... (at offset N)".
dp="data parameter: "
check "${dp}byte 256 is not in the range 0..255" '256'
check "${dp}byte: '08' is not a number" '08'
check "${dp}byte: '0x' is not a number" '0x'
check "${dp}negative numbers" '1 -1'
check "${dp}le word: negative" 'le16:-1'
check "${dp}le16: 65536 does not fit in 16 bits" 'le16:0x10000'
check "${dp}be32: .* does not fit" 'be32:0x100000000'
check "${dp}be word: '18446744073709551616' is too large" 'be64:18446744073709551616'
check "${dp}unexpected 'l'" 'lx16:1'
check "${dp}unexpected 'z'" 'z'
check "${dp}unexpected byte 0x01" $'\001'
check "${dp}string not terminated" '"abc'
check "${dp}\\\\x in a string" '"\x4"'
check "${dp}octal and unicode escapes" '"\101"'
check "${dp}'\(' without a matching '\)'" '(1'
check "${dp}'\)' without a matching '\('" '1)'
check "${dp}'<' must be followed" '<'
check "${dp}<\( script not terminated" '<(echo'
check "${dp}<\(exit 3\): the script failed" '<(exit 3)'
check "${dp}</nonexistent: No such file" '</nonexistent'
check "${dp}\[2:1\] is not a slice" '1[2:1]'
check "${dp}\[0:3\] is not a slice" '(1 2)[0:3]'
check "${dp}expected ':'" '1[0]'
check "${dp}'->' must be followed by \\\\name" '1 -> x'
check "${dp}'\*' cannot follow an @ offset" '@1 *2'
check "${dp}\\\\nope is not defined" '\nope'
check "${dp}\\\\a is not defined" '(1 -> \a) \a'
check "${dp}"'\$nope: variable not found' '$nope'
check "${dp}'\\$' must be followed" '$'
check "${dp}@-2 goes before the start" '1 @-2'
check "${dp}@-1 goes before the start" '1 (@-1)'
check "${dp}@\^3: the alignment must be a power of 2" '@^3'
check "${dp}@\^0: the alignment must be a power of 2" '@^0'

# Hostile: sizes past 2^63 - 1, found before anything is stored.
check "${dp}\*2 makes the data too large" '(1)*9223372036854775807*2'
check "${dp}\*3 makes the data too large" '(1 2)*2305843009213693952*3'
check "${dp}the data is too large" '@9223372036854775807 1'
check "${dp}the data is too large" '1 @+9223372036854775807'
check "${dp}the data is too large" '@9223372036854775807 @^4'
check "${dp}the data is too large" \
  '(1)*4611686018427387904 (1)*4611686018427387904'
check "${dp}@ offset 9223372036854775808 is too large" '@9223372036854775808'
check "${dp}@offset: '18446744073709551616' is too large" \
  '@18446744073709551616'
# Deep nesting, and variables and names that grow without end.
check "${dp}groups or variables are nested too deeply" \
  "$(printf '(%.0s' {1..100000})"
check "${dp}in \\\$a: .*nested too deeply" '$a' a='$a'
check "${dp}in \\\$[ab]: .*nested too deeply" '$a' a='$b' b='1 $a'
names='1 -> \a'
for i in {1..250}; do names+=' (\a \a) -> \a'; done
check "${dp}(the expression is nested too deeply|\*|the data is too large)" "$names \\a"

# A huge but legal expression is not an error: size= bounds the work.
t "$NBDKIT" -U - data '((1 2 3)*1000000000000)*1000000' size=1M \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 1048576 ] || fail "size= of a huge expression"
