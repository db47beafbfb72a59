#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad input to the tcl plugin: a proc that raises an error, returns
# too few bytes, the wrong type, or names a POSIX errno; a script that
# does not parse, lacks a required proc or takes no parameters.  Each
# gives one log line naming the script and the proc, the client EIO
# (or the errno the script named), and the server keeps serving.  It
# would catch: a Tcl error swallowed (garbage sent as data), a short
# buffer copied past its end, errors that kill the server or the
# connection, a start-up error that does not exit 1.
source "$(dirname "$0")/functions.sh"
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

expect_line ()
{
  grep -Fq "$1" "$tmpdir/log" || fail "no log line: $1"
}
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
startup ()
{
  local what="$1" want="$2"
  shift 2
  if t "$NBDKIT" -U - tcl "$@" --run true > "$tmpdir/out" 2>&1; then
    fail "$what: the server started"
  fi
  cat "$tmpdir/out"
  grep -Fq "$want" "$tmpdir/out" || fail "$what: no line '$want'"
}
printf 'proc plugin_open {readonly} {\n  return 1\n' > "$tmpdir/parse.tcl"
startup "syntax error" "$tmpdir/parse.tcl: could not load the Tcl script" \
  "$tmpdir/parse.tcl"
printf 'proc plugin_open {r} { return 1 }\nproc get_size {h} { return 1 }\n' \
  > "$tmpdir/nopread.tcl"
startup "missing pread" \
  "$tmpdir/nopread.tcl: pread: the script does not define this required proc" \
  "$tmpdir/nopread.tcl"
startup "parameter without config" \
  "$tmpdir/nopread.tcl: unknown parameter 'foo'" "$tmpdir/nopread.tcl" foo=bar
printf 'error "top level says no"\n' > "$tmpdir/toplevel.tcl"
startup "error at top level" "top level says no" "$tmpdir/toplevel.tcl"
startup "no script" "must be script=" foo=bar
echo "OK: the tcl plugin's error paths"
