#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin's directory= is another name for dir=: the same export
# list and the same files served by name.  And -D file.zero=1 logs how
# each zero request was carried out (with -v: a hole punched, ZERO_RANGE, or
# zeroes written), where without it nothing is logged.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh

dir="$tmpdir/exports"
mkdir "$dir"
printf 'first' > "$dir/a.img"; truncate -s 1M "$dir/a.img"
printf 'second' > "$dir/b.img"; truncate -s 2M "$dir/b.img"
mkdir "$dir/subdir"

for key in dir directory; do
  t "$NBDKIT" -U - file "$key=$dir" --run 'nbdinfo --list --json "$uri"' \
    > "$tmpdir/list.$key" || fail "$key=: nbdinfo --list failed"
  t "$NBDKIT" -U - file "$key=$dir" --run '
    nbdsh -u "nbd+unix:///b.img?socket=$unixsocket" -c "assert h.pread(6, 0) == b\"second\"
assert h.get_size() == 2 * 1024 * 1024"' ||
    fail "$key=: export b.img is not the file"
done
sed 's/"[^"]*unix[^"]*"//g' "$tmpdir/list.dir" > "$tmpdir/a"
sed 's/"[^"]*unix[^"]*"//g' "$tmpdir/list.directory" > "$tmpdir/b"
diff -u "$tmpdir/a" "$tmpdir/b" || fail "directory= lists other exports than dir="
grep -q '"a.img"' "$tmpdir/b" && grep -q '"b.img"' "$tmpdir/b" ||
  fail "directory=: a.img and b.img not listed"
grep -q subdir "$tmpdir/b" && fail "directory=: a subdirectory was listed"

disk="$tmpdir/disk.img"
head -c 4M /dev/urandom > "$disk"
zeroes='
h.zero(1048576, 0)
h.zero(65536, 2097152, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(1048576, 0) == bytes(1048576)
'
t "$NBDKIT" -U - -f -v -D file.zero=1 file "$disk" \
  --run "nbdsh -u \"\$uri\" -c '$zeroes'" 2> "$tmpdir/log" ||
  fail "-D file.zero=1: the server failed"
cat "$tmpdir/log"
grep -E "debug: .*disk.img: zero 1048576 bytes at 0: " "$tmpdir/log" ||
  fail "-D file.zero=1: no debug line for the first zero"
grep -E "zero 65536 bytes at 2097152: " "$tmpdir/log" ||
  fail "-D file.zero=1: no debug line for the second zero"

t "$NBDKIT" -U - -f -v file "$disk" \
  --run "nbdsh -u \"\$uri\" -c '$zeroes'" 2> "$tmpdir/log2"
grep -q ': zero [0-9]* bytes at' "$tmpdir/log2" &&
  fail "zero requests logged without -D file.zero=1"
exit 0
