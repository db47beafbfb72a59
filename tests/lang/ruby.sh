# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/lang/ruby.sh: the ruby host's part of lang/host-test.sh (libruby).
# libruby cannot run under ASan/LSan: Ruby's own thread (the timer
# thread) carries a dynamic TLS vector LSan's leak scan cannot walk
# (its tracer dies: "Tracer caught signal 11" in DTLS), and Ruby
# replaces each thread's alternate signal stack, which ASan owns.
# The probes' message is Ruby's, cut at bpftrace's string length.
lang_sanitizers="libruby: LSan cannot scan Ruby's threads"
probe_message="RuntimeError: disk full ($tmpdir"

# lang_script NAME: the script NAME (probe) on stdout.
lang_script ()
{
  case "$1" in
    probe) cat <<'RUBY'
def config(key, value)
  Nbdkit.probe("rubyconf", 7, -3, "#{key}=#{value}")
end
def open(readonly) :h end
def get_size(h) 1048576 end
def pread(h, count, offset)
  if offset == 8192
    Nbdkit.set_error(Errno::ENOSPC)
    raise "disk full"
  end
  Nbdkit.probe("rubyread", count, -offset, "read #{count} at #{offset}")
  sleep 0.002
  "\0".b * count
end
RUBY
      ;;
    # The server calls of nbdkit 1.34..1.40 (tests/lang/server-calls.sh).
    calls) cat <<'RUBY'
$p, $delay = 0, [0, 0]
def config(key, value)
  case key
  when "prob" then $p = Nbdkit.parse_probability("prob", value)
  when "delay" then $delay = Nbdkit.parse_delay("delay", value)
  else raise "unknown parameter #{key}"
  end
end
def open(readonly) :h end
def get_size(h) 65536 end
def pread(h, count, offset)
  Nbdkit.disconnect(true) if offset == 4096
  Nbdkit.disconnect(false) if offset == 8192
  line = offset == 12288 ? "#{($p * 1000000).round} #{$delay[0]} #{$delay[1]}" : ""
  line.ljust(count)[0, count]
end
RUBY
      ;;
    *) fail "no ruby script $1" ;;
  esac
}

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
lang_plugin ()
{
debian="$ref_nbdkit"
example="$abs_top_srcdir/plugins/ruby/examples/ramdisk.rb"
size=3145728

ramdisk_client

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
}

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
lang_errors ()
{
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
printf 'def open(readonly)\n  1\n' > "$tmpdir/parse.rb"
start_fails "syntax error" "$tmpdir/parse.rb: could not load the Ruby script: SyntaxError" \
  "$tmpdir/parse.rb"
printf 'def open(r) 1 end\ndef get_size(h) 1 end\n' > "$tmpdir/nopread.rb"
start_fails "missing pread" \
  "$tmpdir/nopread.rb: pread: the script does not define this required method" \
  "$tmpdir/nopread.rb"
start_fails "parameter without config" \
  "$tmpdir/nopread.rb: unknown parameter 'foo'" "$tmpdir/nopread.rb" foo=bar
printf 'raise "top level says no"\n' > "$tmpdir/toplevel.rb"
start_fails "error at top level" \
  "$tmpdir/toplevel.rb: could not load the Ruby script: RuntimeError: top level says no" \
  "$tmpdir/toplevel.rb"
start_fails "no script" "must be script=" foo=bar
echo "OK: the ruby plugin's error paths"
}
