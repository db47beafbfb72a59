# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/lang/tcl.sh: the tcl host's part of lang/host-test.sh (libtcl).
probe_message="disk full]"

# lang_script NAME: the script NAME (probe) on stdout.
lang_script ()
{
  case "$1" in
    probe) cat <<'TCL'
proc config {key value} { nbdkit_probe tclconf 7 -3 "$key=$value" }
proc plugin_open {readonly} { return h }
proc get_size {h} { return 1048576 }
proc pread {h count offset} {
    if {$offset == 8192} {
        error "disk full" {} {POSIX ENOSPC {no space}}
    }
    nbdkit_probe tclread $count -$offset "read $count at $offset"
    after 2
    return [binary format x$count]
}
TCL
      ;;
    # The server calls of nbdkit 1.34..1.40 (tests/lang/server-calls.sh).
    calls) cat <<'TCL'
set p 0
set delay {0 0}
proc config {key value} {
    global p delay
    switch -- $key {
        prob { set p [nbdkit_parse_probability prob $value] }
        delay { set delay [nbdkit_parse_delay delay $value] }
        default { error "unknown parameter $key" }
    }
}
proc plugin_open {readonly} { return h }
proc get_size {h} { return 65536 }
proc pread {h count offset} {
    global p delay
    if {$offset == 4096} { nbdkit_disconnect true }
    if {$offset == 8192} { nbdkit_disconnect false }
    set line ""
    if {$offset == 12288} {
        set line "[expr {round($p * 1000000)}] [lindex $delay 0] [lindex $delay 1]"
    }
    return [string range [format "%-*s" $count $line] 0 [expr {$count - 1}]]
}
TCL
      ;;
    *) fail "no tcl script $1" ;;
  esac
}

# Same script, same bytes: the Tcl RAM disk example
# (plugins/tcl/examples/ramdisk.tcl) served by Debian's nbdkit 1.32 and
# by ours, driven by the same client (writes, FUA write, zero, trim,
# flush, a refused fast zero), gives the same disk content, size and
# flags.  Ours is started with the bare script path (the magic key) and
# Debian's with script=, and size= reaches the script's config proc.
# It would catch: a callback wired to the wrong proc or with arguments
# in the wrong order, a byte array mangled on the way in or out, flags
# that differ from 1.32's (can_zero, fast zero, FUA, flush, trim).
lang_plugin ()
{
debian="$ref_nbdkit"
requires test -f "$debian_plugindir/nbdkit-tcl-plugin.so"
example="$abs_top_srcdir/plugins/tcl/examples/ramdisk.tcl"
size=3145728

ramdisk_client

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
}

# Bad input to the tcl plugin: a proc that raises an error, returns
# too few bytes, the wrong type, or names a POSIX errno; a script that
# does not parse, lacks a required proc or takes no parameters.  Each
# gives one log line naming the script and the proc, the client EIO
# (or the errno the script named), and the server keeps serving.  It
# would catch: a Tcl error swallowed (garbage sent as data), a short
# buffer copied past its end, errors that kill the server or the
# connection, a start-up error that does not exit 1.
lang_errors ()
{
requires_cmd nbdsh
script="$tmpdir/bad.tcl"
cat > "$script" <<'TCL'
proc plugin_open {readonly} { return h }
proc get_size {h} { return 1048576 }
# The offset chooses how a read fails.
proc pread {h count offset} {
    switch -- $offset {
        512  { error "the disk is on fire" }
        1024 { return [binary format x10] }
        1536 { error "no room" {} {POSIX ENOSPC {no space left on device}} }
        2048 { return -code error "by return" }
        2560 { nbdkit_probe bad_probe 12abc }
        3072 { set f [open /nonexistent/file r] }
        4096 { return [binary format x[expr {$count * 2}]] }
    }
    return [binary format x$count]
}
proc pwrite {h buf offset} { error "read-only today" {} {POSIX EROFS x} }
proc can_trim {h} { return 1 }
proc trim {h count offset} { error "trim\nover two lines" }
TCL

start_server tcl "$script" 2> "$tmpdir/log"
t nbdsh -u "$uri" -c '
def err(f):
    try:
        f()
    except nbd.Error as e:
        return e.errno
    return None
assert err(lambda: h.pread(512, 0)) is None
assert err(lambda: h.pread(512, 512)) == "EIO"
assert err(lambda: h.pread(512, 1024)) == "EIO"
assert err(lambda: h.pread(512, 1536)) == "ENOSPC", err(lambda: h.pread(512, 1536))
assert err(lambda: h.pread(512, 2048)) == "EIO"
assert err(lambda: h.pread(512, 2560)) == "EIO"
# ENOENT from a failed Tcl open has no NBD word: EINVAL on the wire (not EIO).
assert err(lambda: h.pread(512, 3072)) == "EINVAL"
# Longer than asked: the rest is ignored, as in 1.32.
assert h.pread(512, 4096) == bytes(512)
assert err(lambda: h.pwrite(b"x" * 512, 0)) == "EPERM"  # EROFS on the wire
assert err(lambda: h.trim(512, 0)) == "EIO"
# Still serving, on this connection.
assert h.pread(512, 8192) == bytes(512)
' || { cat "$tmpdir/log"; fail "the client did not see the expected errors"; }
kill -0 "$server_pid" || fail "the server died"
stop_server

# can_flush returns "maybe": each connection fails to open, and the
# server is still up.
echo 'proc can_flush {h} { return maybe }' >> "$script"
start_server tcl "$script" 2>> "$tmpdir/log"
for i in 1 2; do
  expect_fail t nbdsh -u "$uri" -c 'h.flush()' 2>/dev/null ||
    fail "a connection opened although can_flush failed"
done
kill -0 "$server_pid" || fail "the server died"
cat "$tmpdir/log"
expect_line "$script: pread: the disk is on fire"
expect_line "$script: pread: returned 10 bytes, expected 512"
expect_line "$script: pread: no room"
expect_line "$script: pread: by return"
expect_line "$script: pread: expected integer but got \"12abc\""
expect_line "$script: pread: couldn't open \"/nonexistent/file\""
expect_line "$script: pwrite: read-only today"
expect_line "$script: trim: trim over two lines"
expect_line "$script: can_flush: expected boolean value but got \"maybe\""
stop_server

# Start-up errors: one line naming the script, exit status 1.
printf 'proc plugin_open {readonly} {\n  return 1\n' > "$tmpdir/parse.tcl"
start_fails "syntax error" "$tmpdir/parse.tcl: could not load the Tcl script" \
  "$tmpdir/parse.tcl"
printf 'proc plugin_open {r} { return 1 }\nproc get_size {h} { return 1 }\n' \
  > "$tmpdir/nopread.tcl"
start_fails "missing pread" \
  "$tmpdir/nopread.tcl: pread: the script does not define this required proc" \
  "$tmpdir/nopread.tcl"
start_fails "parameter without config" \
  "$tmpdir/nopread.tcl: unknown parameter 'foo'" "$tmpdir/nopread.tcl" foo=bar
printf 'error "top level says no"\n' > "$tmpdir/toplevel.tcl"
start_fails "error at top level" "top level says no" "$tmpdir/toplevel.tcl"
start_fails "no script" "must be script=" foo=bar
echo "OK: the tcl plugin's error paths"
}
