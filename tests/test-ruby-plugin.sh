#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Same script, same bytes: the Ruby RAM disk example
# (plugins/ruby/examples/ramdisk.rb), served by our nbdkit and driven
# by a client (writes, FUA write, zero, trim, flush, a refused fast
# zero), gives the disk content, size and flags that Debian's nbdkit
# 1.32 gives for the same client.
#
# Debian's ruby host calls the Ruby VM from the server's worker threads,
# which Ruby 3.1 does not allow: it crashes at the first request (a
# segfault in rb_protect).  So the reference is Debian's host on the
# same script when it works, and otherwise Debian's Tcl host on the
# Tcl example, the same RAM disk (1.32's Tcl and Ruby hosts advertise
# the same flags, both being API version 1 plugins with the same
# callbacks).  Ours is started with the bare script path (the magic key)
# and size= reaches the script's config method.  It would catch: a
# callback wired to the wrong method or with its arguments in the wrong
# order, binary data mangled (encoding), flags that differ from 1.32's.
source "$(dirname "$0")/functions.sh"
# libruby cannot run under ASan/LSan: Ruby's own thread (the timer
# thread) carries a dynamic TLS vector LSan's leak scan cannot walk
# (its tracer dies: "Tracer caught signal 11" in DTLS), and Ruby
# replaces each thread's alternate signal stack, which ASan owns.
skip_under_sanitizers "libruby: LSan cannot scan Ruby's threads"
requires_cmd nbdsh nbdinfo
debian=/usr/bin/nbdkit
requires test -x "$debian"
so="$abs_top_builddir/plugins/ruby/.libs/nbdkit-ruby-plugin.so"
[ -f "$so" ] || fail "$so not built"
example="$abs_top_srcdir/plugins/ruby/examples/ramdisk.rb"
size=3145728

client='
import hashlib
h.pwrite(b"hello, ruby " * 400, 4096)
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
info='nbdinfo "$uri" | grep -E "export-size|is_|can_"'

t "$NBDKIT" -U - ruby "$example" size=$size \
  --run "nbdsh -u \"\$uri\" -c '$client' && $info" > "$tmpdir/ours.out" ||
  fail "our nbdkit failed on the example"
cat "$tmpdir/ours.out"
grep -q "^size: $size\$" "$tmpdir/ours.out" || fail "wrong size"

if [ -f "$debian_plugindir/nbdkit-ruby-plugin.so" ] &&
   t "$debian" -U - ruby script="$example" size=$size \
     --run "nbdsh -u \"\$uri\" -c '$client' && $info" \
     > "$tmpdir/debian.out" 2> "$tmpdir/debian.err"; then
  echo "reference: Debian's ruby host"
else
  echo "reference: Debian's ruby host failed ($(grep -m1 -o '\[BUG\].*' "$tmpdir/debian.err" || echo 'no output')); using its tcl host"
  requires test -f "$debian_plugindir/nbdkit-tcl-plugin.so"
  t "$debian" -U - tcl script="$abs_top_srcdir/plugins/tcl/examples/ramdisk.tcl" \
    size=$size --run "nbdsh -u \"\$uri\" -c '$client' && $info" \
    > "$tmpdir/debian.out" || fail "Debian's nbdkit failed on the Tcl example"
fi
diff -u "$tmpdir/debian.out" "$tmpdir/ours.out" ||
  fail "Debian's nbdkit and ours differ"

# Read-only: can_write false.
t "$NBDKIT" -r -U - ruby "$example" --run "$info" > "$tmpdir/ro"
grep -q "is_read_only: true" "$tmpdir/ro" || fail "-r: not read-only"

# The can_* methods and is_rotational answer for the script (Ruby's
# truth: nil is false, 0 is true), and close is called at the end of
# the connection.  Expected: what Debian's Tcl host gives for the same
# answers (test-tcl-plugin.sh checks those against 1.32).
flags="$tmpdir/flags.rb"
cat > "$flags" <<RUBY
def open(readonly) [:h, readonly] end
def close(h) File.write("$tmpdir/closed", "closed #{h.inspect}\\n", mode: "a") end
def get_size(h) 4096 end
def pread(h, count, offset) "\\0".b * count end
def pwrite(h, buf, offset) end
def can_write(h) nil end
def can_flush(h) false end
def can_trim(h) false end
def is_rotational(h) 0 end
RUBY
t "$NBDKIT" -U - ruby "$flags" --run "$info" > "$tmpdir/flags"
cat "$tmpdir/flags"
cat > "$tmpdir/flags.expected" <<'OUT'
	export-size: 4096 (4K)
	is_rotational: true
	is_read_only: true
	can_cache: false
	can_df: true
	can_fast_zero: false
	can_flush: false
	can_fua: false
	can_multi_conn: false
	can_trim: false
	can_zero: false
OUT
diff -u "$tmpdir/flags.expected" "$tmpdir/flags" ||
  fail "the can_* methods give the wrong flags"
grep -qx "closed \[:h, false\]" "$tmpdir/closed" || fail "close was not called"

# --dump-plugin names the Ruby version; the script's dump_plugin adds
# its lines.
printf 'def open(r) 1 end\ndef get_size(h) 0 end\ndef pread(h, c, o) "" end\ndef dump_plugin\n  puts "myscript_dump=yes"\nend\n' \
  > "$tmpdir/dump.rb"
t "$NBDKIT" ruby "$tmpdir/dump.rb" --dump-plugin > "$tmpdir/dump"
grep -q '^ruby_api_version=3\.' "$tmpdir/dump" || fail "no ruby_api_version"
grep -q '^myscript_dump=yes$' "$tmpdir/dump" || fail "no line from the script's dump_plugin"
echo "OK: same script, same bytes"
