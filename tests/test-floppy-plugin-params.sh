#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The floppy plugin's parameters: each bad value, missing directory or
# tree FAT cannot hold is one error line naming the plugin and the
# parameter, exit status 1, and the server never serves.
source "$(dirname "$0")/functions.sh"

mkdir "$tmpdir/d"
echo hi > "$tmpdir/d/file"
: > "$tmpdir/not-a-dir"

# bad KEY ARGS...: the server refuses ARGS with one line naming KEY.
bad ()
{
  local key="$1" status=0
  shift
  "$NBDKIT" -U - floppy "$@" --run 'echo served' > "$tmpdir/out" \
    2> "$tmpdir/err" || status=$?
  [ "$status" = 1 ] || fail "floppy $*: exit status $status, not 1"
  [ ! -s "$tmpdir/out" ] || fail "floppy $*: the server served"
  [ "$(wc -l < "$tmpdir/err")" = 1 ] ||
    fail "floppy $*: not one line: $(cat "$tmpdir/err")"
  grep -q "floppy.*$key" "$tmpdir/err" ||
    fail "floppy $*: does not name $key: $(cat "$tmpdir/err")"
  echo "floppy $*: $(cat "$tmpdir/err")"
}

bad dir=DIRECTORY
bad dir "$tmpdir/no-such-dir"
bad dir "$tmpdir/not-a-dir"
bad dir dir=
bad label "$tmpdir/d" label=TWELVE_CHARS
bad label "$tmpdir/d" label=
bad label "$tmpdir/d" label=a.b
bad label "$tmpdir/d" 'label=caf€'
bad size "$tmpdir/d" size=foo
bad size "$tmpdir/d" size=0
bad size "$tmpdir/d" size=1000000
bad size "$tmpdir/d" size=1M
bad size "$tmpdir/d" size=4T
bad foo "$tmpdir/d" foo=bar

# Trees FAT cannot hold: the error names the file (and dir=).
head -c 3000000 /dev/urandom > "$tmpdir/d/bigger"
bad "size.*too small for the files" "$tmpdir/d" size=2M
rm "$tmpdir/d/bigger"
echo x > "$tmpdir/d/a:b"
bad 'dir.*a:b' "$tmpdir/d"
rm "$tmpdir/d/a:b"
echo x > "$tmpdir/d/Same"
echo y > "$tmpdir/d/SAME"
bad 'dir.*differ only in case' "$tmpdir/d"
rm "$tmpdir/d/Same" "$tmpdir/d/SAME"
truncate -s 4G "$tmpdir/d/huge"
bad 'dir.*huge' "$tmpdir/d"
rm "$tmpdir/d/huge"

# Good values are accepted: lower case label, size with a suffix.
t "$NBDKIT" -U - floppy "$tmpdir/d" label='ab c' size=40M \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = $((40 * 1024 * 1024)) ] ||
  fail "size=40M gave $(cat "$tmpdir/size")"
