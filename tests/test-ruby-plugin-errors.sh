#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad input to the ruby plugin: a method that raises (with and without
# Nbdkit.set_error, a SystemCallError), returns too few bytes or the
# wrong type; a script that does not parse, lacks a required method,
# takes no parameters or fails at top level.  Each gives one log line
# naming the script and the method, the client EIO (or the errno the
# script chose), and the server keeps serving.  It would catch: an
# exception swallowed (garbage sent as data), a short String copied
# past its end, errors that kill the server or the VM thread, errno set
# in the wrong thread (the client would see EIO), a start-up error that
# does not exit 1.
source "$(dirname "$0")/functions.sh"
# libruby cannot run under ASan/LSan: Ruby's own thread (the timer
# thread) carries a dynamic TLS vector LSan's leak scan cannot walk
# (its tracer dies: "Tracer caught signal 11" in DTLS), and Ruby
# replaces each thread's alternate signal stack, which ASan owns.
skip_under_sanitizers "libruby: LSan cannot scan Ruby's threads"
requires_cmd nbdsh

script="$tmpdir/bad.rb"
cat > "$script" <<'RUBY'
def open(readonly) :h end
def get_size(h) 1048576 end
# The offset chooses how a read fails.
def pread(h, count, offset)
  case offset
  when 512 then raise "the disk is on fire"
  when 1024 then "\0" * 10
  when 1536 then Nbdkit.set_error(Errno::ENOSPC); raise "no room"
  when 2048 then Nbdkit.set_error(28); raise IOError, "no room either"
  when 2560 then File.read("/nonexistent/file")
  when 3072 then 42
  when 3584 then Nbdkit.probe("bad_probe", "12abc")
  when 4096 then "\0".b * (count * 2)
  when 4608 then Nbdkit.set_error(Errno::EROFS.new); raise "by instance"
  else "\0".b * count
  end
end
def pwrite(h, buf, offset)
  raise "two\nlines"
end
def can_trim(h) true end
def trim(h, count, offset)
  nosuchmethod(count)
end
RUBY

start_server ruby "$script" 2> "$tmpdir/log"
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
assert err(lambda: h.pread(512, 1536)) == "ENOSPC"
assert err(lambda: h.pread(512, 2048)) == "ENOSPC"
# Errno::ENOENT has no NBD word: EINVAL on the wire (not EIO).
assert err(lambda: h.pread(512, 2560)) == "EINVAL"
assert err(lambda: h.pread(512, 3072)) == "EIO"
assert err(lambda: h.pread(512, 3584)) == "EIO"
# Longer than asked: the rest is ignored, as in 1.32.
assert h.pread(512, 4096) == bytes(512)
assert err(lambda: h.pread(512, 4608)) == "EPERM"  # EROFS on the wire
assert err(lambda: h.pwrite(b"x" * 512, 0)) == "EIO"
assert err(lambda: h.trim(512, 0)) == "EIO"
assert h.pread(512, 8192) == bytes(512)
' || { cat "$tmpdir/log"; fail "the client did not see the expected errors"; }
kill -0 "$server_pid" || fail "the server died"
stop_server

# get_size returns a String: each connection fails, the server stays up.
echo 'def get_size(h) "big" end' >> "$script"
start_server ruby "$script" 2>> "$tmpdir/log"
for i in 1 2; do
  expect_fail t nbdsh -u "$uri" -c 'h.get_size()' 2>/dev/null ||
    fail "a connection opened although get_size failed"
done
kill -0 "$server_pid" || fail "the server died"
stop_server
cat "$tmpdir/log"

expect_line ()
{
  grep -Fq "$1" "$tmpdir/log" || fail "no log line: $1"
}
expect_line "$script: pread: RuntimeError: the disk is on fire ($script:6:in \`pread')"
expect_line "$script: pread: returned 10 bytes, expected 512"
expect_line "$script: pread: RuntimeError: no room"
expect_line "$script: pread: IOError: no room either"
expect_line "$script: pread: Errno::ENOENT: No such file or directory"
expect_line "$script: pread: returned Integer, expected a String"
expect_line "$script: pread: TypeError: no implicit conversion from string"
expect_line "$script: pwrite: RuntimeError: two lines"
expect_line "$script: trim: NoMethodError: undefined method \`nosuchmethod'"
expect_line "$script: get_size: returned String, expected an Integer"

startup ()
{
  local what="$1" want="$2"
  shift 2
  if t "$NBDKIT" -U - ruby "$@" --run true > "$tmpdir/out" 2>&1; then
    fail "$what: the server started"
  fi
  cat "$tmpdir/out"
  [ "$(grep -c 'error' "$tmpdir/out")" -eq 1 ] ||
    fail "$what: expected one error line"
  grep -Fq "$want" "$tmpdir/out" || fail "$what: no line '$want'"
}
printf 'def open(readonly)\n  1\n' > "$tmpdir/parse.rb"
startup "syntax error" "$tmpdir/parse.rb: could not load the Ruby script: SyntaxError" \
  "$tmpdir/parse.rb"
printf 'def open(r) 1 end\ndef get_size(h) 1 end\n' > "$tmpdir/nopread.rb"
startup "missing pread" \
  "$tmpdir/nopread.rb: pread: the script does not define this required method" \
  "$tmpdir/nopread.rb"
startup "parameter without config" \
  "$tmpdir/nopread.rb: unknown parameter 'foo'" "$tmpdir/nopread.rb" foo=bar
printf 'raise "top level says no"\n' > "$tmpdir/toplevel.rb"
startup "error at top level" \
  "$tmpdir/toplevel.rb: could not load the Ruby script: RuntimeError: top level says no" \
  "$tmpdir/toplevel.rb"
startup "no script" "must be script=" foo=bar
echo "OK: the ruby plugin's error paths"
