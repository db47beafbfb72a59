#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# base64:TEXT in the data plugin's expression language (nbdkit 1.46):
# the bytes TEXT encodes, where any other item could stand, read back
# by nbdsh equal to what Python's base64 module decodes: with and
# without padding, binary bytes (4 KiB of random data), next to
# strings, under * N, [N:M], @offsets and names, inside a $VAR.  Bad
# text (nothing after the colon, a lone character, '=' before the end,
# too much padding, padding bits set) stops the server at start-up with
# one line that says where; the server never starts serving.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires /usr/bin/python3 -c 'import base64'

# read_as EXPR PYEXPR [ARGS...]: the disk made from EXPR reads back as
# the Python bytes PYEXPR (base64 and os are imported).
read_as ()
{
  local expr="$1" want="$2"
  shift 2
  export want
  t "$NBDKIT" -U - data "$expr" "$@" --run 'nbdsh -u "$uri" -c "
import base64, os
want = eval(os.environ[\"want\"])
got = h.pread(h.get_size(), 0)
assert got == want, (got[:64], want[:64], len(got), len(want))
"' || fail "data '$expr' did not read back as $want"
  echo "ok: ${expr:0:60}"
}

read_as 'base64:aGVsbG8=' 'b"hello"'
read_as 'base64:aGVsbG8' 'b"hello"'
read_as 'base64:AA==' 'b"\0"'
read_as 'base64://79/A==' 'bytes([255, 254, 253, 252])'
read_as '"<" base64:aGk= ">"' 'b"<hi>"'
read_as '( base64:QUJD )*3 base64:aGVsbG8=[1:3]' 'b"ABCABCABCel"'
read_as '@4 base64:QUJD @^8 le16:0x4241' 'b"\0\0\0\0ABC\0AB"'
read_as 'base64:QUJD -> \x \x \x' 'b"ABCABC"'
read_as '$v base64:eA==' 'b"yx"' v='base64:eQ=='
read_as '# a comment
base64:QQ== # another
base64:Qg==' 'b"AB"'

# 4 KiB of random bytes, through base64: and through base64=.
head -c 4096 /dev/urandom > "$tmpdir/rand"
b64="$(base64 -w0 "$tmpdir/rand")"
read_as "base64:$b64" "open('$tmpdir/rand', 'rb').read()"
read_as "0 base64:$b64 0" "b'\\0' + open('$tmpdir/rand', 'rb').read() + b'\\0'"
t "$NBDKIT" -U - data base64="$b64" \
  --run 'nbdcopy "$uri" '"$tmpdir/rand.out" || fail "base64= failed"
cmp "$tmpdir/rand" "$tmpdir/rand.out" || fail "base64= bytes differ"

# Bad text: one line, exit 1, before the server serves.
bad ()
{
  refuses "data: error: data parameter: (in \\\$v: )?base64: $1" data "${@:2}" ||
    fail "data ${*:2}: not refused as expected"
}
bad "expected base64 text after 'base64:' \(at offset 7\)" 'base64:'
bad "expected base64 text" 'base64: aGk='
bad "'a' is not valid base64" 'base64:a'
bad "'aGl' is not valid base64" 'base64:aGl'        # padding bits set
bad "'=' can only end the text \(at offset 10\)" 'base64:aG=k'
bad "'aGk====' is not valid base64" 'base64:aGk===='
bad "'==' encodes no bytes" 'base64:=='
bad "'a' is not valid base64" '$v' v='base64:a'
refuses "data: error: data parameter: unexpected '!'" data 'base64:aGk=!' ||
  fail "base64:aGk=! accepted"
