#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The eval plugin against Debian's: the man page's file-backed example
# (config= for an unknown key, can_write implied by pwrite=), a
# read-only disk of zeroes, and a missing= script standing in for every
# method not given, each with the same size, flags, map, bytes copied
# and bytes written under our nbdkit and Debian's.  Then the error
# paths: an error with an errno, a garbage exit code, an unknown key
# without config=, each one clear line.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((2 << 20))
state_files=("$disk")

file_args=(
  eval
  config='ln -sf "$(realpath "$3")" $tmpdir/file'
  get_size='stat -Lc %s $tmpdir/file'
  pread='dd if=$tmpdir/file skip=$4 count=$3 iflag=count_bytes,skip_bytes
         status=none'
  pwrite='dd of=$tmpdir/file seek=$4 conv=notrunc oflag=seek_bytes status=none'
  file="$disk"
)
compare "eval file read" read "${file_args[@]}"
compare "eval file write" write "${file_args[@]}"
compare "eval file flush+zero" write "${file_args[@]}" \
  can_flush='exit 0' flush='sync $tmpdir/file' \
  zero='head -c $3 /dev/zero |
        dd of=$tmpdir/file seek=$4 conv=notrunc oflag=seek_bytes status=none' \
  thread_model='echo parallel' can_multi_conn='exit 0'

compare "eval zeroes" read eval get_size=' echo 64M ' \
  pread=' dd if=/dev/zero count=$3 iflag=count_bytes status=none '

# missing=: everything not given goes there, with $1 the method.
compare "eval missing" read eval \
  missing='case "$1" in
             get_size) echo 1M ;;
             pread) head -c $3 /dev/zero ;;
             can_extents) exit 0 ;;
             extents) echo 0 512K hole,zero; echo 512K 512K ;;
             *) exit 2 ;;
           esac'
expect_in "eval missing map" "$ours" '^ +0 +524288 +3 +hole,zero$'
finish

# Error paths.
py='
def err(off):
    try:
        h.pread(512, off)
    except nbd.Error as e:
        return e.errno
    return 0
assert err(0) == 0
assert err(512) == "ENOSPC", err(512)
assert err(1024) == "EIO", err(1024)
print("ok")
'
t "$NBDKIT" -U - eval get_size='echo 1M' \
  pread='case $4 in
           0) head -c $3 /dev/zero ;;
           512) echo "ENOSPC out of space" >&2; exit 1 ;;
           *) echo "rubbish" >&2; exit 99 ;;
         esac' --run "nbdsh -u \"\$uri\" -c '$py'" > "$tmpdir/res" \
  2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "eval: wrong errors"; }
grep -q 'pread: out of space$' "$tmpdir/err" || fail "no ENOSPC message"
grep -q 'pread: rubbish$' "$tmpdir/err" || fail "no garbage message"

# An unknown key without config=: one line naming it, exit 1.
status=0
t "$NBDKIT" eval get_size='echo 1M' pread='exit 1' bogus=1 \
  > "$tmpdir/res" 2>&1 || status=$?
cat "$tmpdir/res"
[ "$status" -eq 1 ] || fail "bogus=1: exit status $status"
[ "$(wc -l < "$tmpdir/res")" -eq 1 ] || fail "bogus=1: not one line"
grep -q "unknown parameter 'bogus'" "$tmpdir/res" || fail "bogus=1: message"

# config= refusing a key: its message, exit 1.
status=0
t "$NBDKIT" eval config='echo "EINVAL $2 is not allowed" >&2; exit 1' \
  get_size='echo 1M' pread='exit 1' size=3 > "$tmpdir/res" 2>&1 || status=$?
cat "$tmpdir/res"
[ "$status" -eq 1 ] || fail "config= error: exit status $status"
grep -q "config: size is not allowed" "$tmpdir/res" || fail "config= message"

# list_exports formats (compared by hand: Debian's nbdkit drops a last
# name that has no newline after it, "NAMES\na\nb" listing only "a";
# we keep it, as every line is a name).
list ()
{
  t "$NBDKIT" -U - eval get_size='echo 1M' pread='head -c $3 /dev/zero' \
    list_exports="$1" --run 'nbdinfo --list --json "$uri"' |
    /usr/bin/python3 -c '
import json, sys
print([(e["export-name"], e.get("description"))
       for e in json.load(sys.stdin)["exports"]])'
}
[ "$(list 'printf "NAMES\na\nb"')" = "[('a', None), ('b', None)]" ] ||
  fail "NAMES without a final newline"
[ "$(list 'printf "a\nb\n"')" = "[('a', None), ('b', None)]" ] ||
  fail "names without a header"
[ "$(list 'printf "NAMES+DESCRIPTIONS\na\nb\nc\nd\ne\n"')" = \
  "[('a', 'd'), ('b', 'e'), ('c', None)]" ] || fail "NAMES+DESCRIPTIONS"
[ "$(list 'printf "INTERLEAVED\na\nda\nb\n"')" = \
  "[('a', 'da'), ('b', None)]" ] || fail "INTERLEAVED"
