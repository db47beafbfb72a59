#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The iso plugin: directories become an ISO 9660 image made by xorriso
# (or genisoimage with prog=), with params= passed on; the files are
# read back with isoinfo, and qemu-img sees the same bytes as nbdcopy.
# Debian's nbdkit gives an image of the same size and flags, with the
# same files.  Debian's prog=genisoimage is broken (it passes xorriso's
# "-as mkisofs" to genisoimage): ours is checked to work instead.  Bad
# parameters and a failing program exit 1 with one line.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdcopy qemu-img isoinfo xorriso genisoimage
source "$srcdir/debian-filters.sh"
requires test -f "$debian_plugindir/nbdkit-iso-plugin.so"
export TMPDIR="$tmpdir"

d1="$tmpdir/one"
d2="$tmpdir/two"
mkdir -p "$d1/sub/deeper" "$d2"
echo "first directory" > "$d1/first.txt"
head -c 200000 /dev/urandom > "$d1/sub/random.bin"
echo deep > "$d1/sub/deeper/a long file name.text"
echo "second directory" > "$d2/second.txt"

# check_files IMG OPT: the files of both directories are in IMG, read
# with isoinfo's extension OPT (-R: Rock Ridge, -J: Joliet).
check_files ()
{
  local img="$1" opt="$2" f src
  for f in first.txt sub/random.bin "sub/deeper/a long file name.text" \
           second.txt; do
    src="$d1/$f"
    [ -f "$src" ] || src="$d2/$f"
    isoinfo "$opt" -i "$img" -x "/$f" > "$tmpdir/got" ||
      fail "$img: isoinfo could not read /$f"
    cmp -s "$src" "$tmpdir/got" || fail "$img: /$f differs"
  done
}

# --- Ours -------------------------------------------------------------------
start_server iso "$d1" dir="$d2" params='-JrT -V "TEST VOL"'
t nbdcopy "$uri" "$tmpdir/ours.iso" || fail "nbdcopy failed"
t qemu-img convert -f raw -O raw "$uri" "$tmpdir/qemu.iso" ||
  fail "qemu-img convert failed"
cmp "$tmpdir/ours.iso" "$tmpdir/qemu.iso" ||
  fail "qemu-img and nbdcopy read different bytes"
stop_server
check_files "$tmpdir/ours.iso" -R
check_files "$tmpdir/ours.iso" -J
isoinfo -d -i "$tmpdir/ours.iso" | grep -q '^Volume id: TEST VOL$' ||
  fail "params= did not set the volume ID"

# prog=genisoimage (Debian's fails here: see above).
t "$NBDKIT" -U - iso "$d1" "$d2" prog=genisoimage params='-J -T' \
  --run 'nbdcopy "$uri" '"$tmpdir/geniso.iso" ||
  fail "prog=genisoimage failed"
check_files "$tmpdir/geniso.iso" -J
# (xorriso ignores -T; genisoimage writes the tables.)
isoinfo -f -i "$tmpdir/geniso.iso" | grep -q 'TRANS.TBL' ||
  fail "genisoimage params=-T made no TRANS.TBL"

# Without extensions, names are ISO 9660 ones.
t "$NBDKIT" -U - iso "$d1" --run 'nbdcopy "$uri" '"$tmpdir/plain.iso" ||
  fail "no params failed"
isoinfo -f -i "$tmpdir/plain.iso" | grep -q '^/FIRST.TXT;1$' ||
  fail "plain ISO 9660 names not as expected"

# --- Debian's: same size and flags; same files ----------------------------
for params in "" "-JrT" "-r -V VOL"; do
  for s in ours ref; do
    [ $s = ours ] && srv="$NBDKIT" || srv="$ref_nbdkit"
    t "$srv" -U - iso "$d1" "$d2" params="$params" \
      --run 'nbdinfo --json "$uri"' 2>/dev/null |
      /usr/bin/python3 "$probedir/flags.py" > "$tmpdir/fl.$s" ||
      note_failure "iso params=$params" "$srv failed"
  done
  diff -u "$tmpdir/fl.ref" "$tmpdir/fl.ours" ||
    note_failure "iso params=$params" "size or flags differ from Debian's"
done
t "$ref_nbdkit" -U - iso "$d1" "$d2" params=-JrT \
  --run 'nbdcopy "$uri" '"$tmpdir/ref.iso" 2>/dev/null ||
  fail "Debian's nbdkit failed"
check_files "$tmpdir/ref.iso" -R

# --- Bad parameters, failing programs -----------------------------------------
bad ()
{
  local want="$1"
  shift
  refuses "$want" iso "$@" ||
    fail "iso $*: not refused with one line /$want/"
}
bad "dir" params=-r
bad "dir=$tmpdir/missing" "$tmpdir/missing"
bad "dir=.*not a directory" "$d1/first.txt"
bad "'foo'" "$d1" foo=bar
bad "prog=" "$d1" prog=
bad "false failed \(exit status 1\)" "$d1" prog=false
bad "Unrecognized option '--bogus'" "$d1" params=--bogus
bad "failed \(exit status 127\)" "$d1" prog=/nonexistent/mkisofs
[ -z "$(ls "$tmpdir" | grep '^iso')" ] || fail "temporary files left"

finish
