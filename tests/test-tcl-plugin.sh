#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Same script, same bytes: the Tcl RAM disk example
# (plugins/tcl/examples/ramdisk.tcl) served by Debian's nbdkit 1.32 and
# by ours, driven by the same client (writes, FUA write, zero, trim,
# flush, a refused fast zero), gives the same disk content, size and
# flags.  Ours is started with the bare script path (the magic key) and
# Debian's with script=, and size= reaches the script's config proc.
# It would catch: a callback wired to the wrong proc or with arguments
# in the wrong order, a byte array mangled on the way in or out, flags
# that differ from 1.32's (can_zero, fast zero, FUA, flush, trim).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
debian=/usr/bin/nbdkit
requires test -x "$debian"
requires test -f "$debian_plugindir/nbdkit-tcl-plugin.so"
so="$abs_top_builddir/plugins/tcl/.libs/nbdkit-tcl-plugin.so"
[ -f "$so" ] || fail "$so not built"
example="$abs_top_srcdir/plugins/tcl/examples/ramdisk.tcl"
size=3145728

client='
import hashlib
h.pwrite(b"hello, tcl " * 400, 4096)
h.pwrite(bytes(range(256)) * 64, 1048576 - 100)
h.pwrite(b"\xff" * 512, 0, nbd.CMD_FLAG_FUA)
h.zero(1000, 4200)
h.zero(4096, 2097152 - 4096)
h.zero(2048, 2097152 + 4096, nbd.CMD_FLAG_NO_HOLE)
h.trim(512, 3145728 - 512)
h.flush()
try:
    h.zero(512, 8192, nbd.CMD_FLAG_FAST_ZERO)
    print("fast zero: ok")
except nbd.Error as e:
    print("fast zero:", e.errno)
print("size:", h.get_size())
print("md5:", hashlib.md5(h.pread(3145728, 0)).hexdigest())
print("tail:", h.pread(16, 1048576 - 8).hex())
'
# Flags and size as nbdinfo prints them (not the URI, nor the block
# sizes our server advertises and 1.32's does not).
info='nbdinfo "$uri" | grep -E "export-size|is_|can_"'

t "$debian" -U - tcl script="$example" size=$size \
  --run "nbdsh -u \"\$uri\" -c '$client' && $info" > "$tmpdir/debian.out" ||
  fail "Debian's nbdkit failed on the example"
t "$NBDKIT" -U - tcl "$example" size=$size \
  --run "nbdsh -u \"\$uri\" -c '$client' && $info" > "$tmpdir/ours.out" ||
  fail "our nbdkit failed on the example"
cat "$tmpdir/ours.out"
grep -q "can_zero: true" "$tmpdir/ours.out" || fail "no can_zero"
grep -q "^size: $size\$" "$tmpdir/ours.out" || fail "wrong size"
diff -u "$tmpdir/debian.out" "$tmpdir/ours.out" ||
  fail "Debian's nbdkit and ours differ on the same script"

# Read-only: can_write false everywhere, as in 1.32.
for s in "$debian" "$NBDKIT"; do
  t "$s" -r -U - tcl "$example" --run "$info" > "$tmpdir/ro.$(basename "$(dirname "$s")")"
done
diff -u "$tmpdir"/ro.* || fail "read-only flags differ"

# The can_* procs and is_rotational answer for the script, and
# plugin_close is called at the end of each connection: same flags as
# Debian's, and a close for each of the two connections nbdinfo and
# the --run command made.
flags="$tmpdir/flags.tcl"
cat > "$flags" <<TCL
proc plugin_open {readonly} { return [list h \$readonly] }
proc plugin_close {h} {
    set f [open "$tmpdir/closed.\$::server" a]
    puts \$f "closed \$h"
    close \$f
}
proc get_size {h} { return 4096 }
proc pread {h count offset} { return [binary format x\$count] }
proc pwrite {h buf offset} { }
proc can_write {h} { return no }
proc can_flush {h} { return false }
proc can_trim {h} { return 0 }
proc is_rotational {h} { return true }
proc config {key value} { set ::server \$value }
TCL
for s in debian ours; do
  [ $s = debian ] && srv="$debian" || srv="$NBDKIT"
  t "$srv" -U - tcl "$flags" server=$s --run "$info" > "$tmpdir/flags.$s"
done
cat "$tmpdir/flags.ours"
grep -q "is_rotational: true" "$tmpdir/flags.ours" || fail "is_rotational"
grep -q "is_read_only: true" "$tmpdir/flags.ours" || fail "can_write"
diff -u "$tmpdir/flags.debian" "$tmpdir/flags.ours" ||
  fail "the can_* procs give different flags"
diff -u "$tmpdir/closed.debian" "$tmpdir/closed.ours" ||
  fail "plugin_close was not called as in 1.32"
grep -q "^closed h 0\$" "$tmpdir/closed.ours" || fail "no plugin_close"

# --dump-plugin names the Tcl version.
t "$NBDKIT" tcl "$example" --dump-plugin > "$tmpdir/dump"
grep -q '^tcl_version=8\.' "$tmpdir/dump" || fail "no tcl_version in --dump-plugin"
echo "OK: same script, same bytes"
