#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ruby plugin in the background: nbdkit without -f forks after the
# script is loaded, and the VM thread, which does not survive fork, is
# brought back in the child (see "fork" in plugins/ruby/ruby.c).  The
# script's own Ruby thread (a tick counter, started in open) must run
# between requests, the collector must work there (GC.start in every read, the
# handle and the disk survive it), writes must read back, and the
# server must stop on SIGTERM.  It would catch: the child serving no
# request (the VM thread lost), a deadlock on a lock or condition the
# parent's thread held, Ruby threads frozen by a GVL never released,
# Ruby's signal handlers left in place of the server's.
source "$(dirname "$0")/functions.sh"
# libruby cannot run under ASan/LSan: Ruby's own thread (the timer
# thread) carries a dynamic TLS vector LSan's leak scan cannot walk
# (its tracer dies: "Tracer caught signal 11" in DTLS), and Ruby
# replaces each thread's alternate signal stack, which ASan owns.
skip_under_sanitizers "libruby: LSan cannot scan Ruby's threads"
requires_cmd nbdsh

script="$tmpdir/bg.rb"
cat > "$script" <<'RUBY'
$disk = "\0".b * 1048576
$ticks = 0
$ticker = nil
def open(readonly)
  # Started here, in the child: threads do not survive fork, in Ruby
  # as anywhere.
  $ticker ||= Thread.new { loop { $ticks += 1; sleep 0.01 } }
  { name: "handle" * 10 }
end
def get_size(h) $disk.bytesize end
def pread(h, count, offset)
  garbage = (1..5000).map { |i| "x#{i}" * 4 }
  GC.start
  raise "the handle was collected" unless h[:name] == "handle" * 10
  if offset == 0
    [$ticks].pack("Q<") + $disk.byteslice(8, count - 8)
  else
    $disk.byteslice(offset, count)
  end
end
def pwrite(h, buf, offset) $disk[offset, buf.bytesize] = buf end
RUBY

sock="$tmpdir/sock"
pidfile="$tmpdir/pid"
# No -f: the server forks; the parent exits once the child listens.
t "$NBDKIT" --log=stderr -U "$sock" -P "$pidfile" ruby "$script" \
  2> "$tmpdir/log" || { cat "$tmpdir/log"; fail "the server did not start"; }
wait_for 20 -s "$pidfile" || { cat "$tmpdir/log"; fail "no pid file"; }
pid="$(cat "$pidfile")"
cleanup_fn _kill_pid "$pid"
t nbdsh -u "nbd+unix:///?socket=$sock" -c '
import struct, time
t1 = struct.unpack("<Q", h.pread(512, 0)[:8])[0]
time.sleep(0.5)
t2 = struct.unpack("<Q", h.pread(512, 0)[:8])[0]
print("ticks", t1, t2)
assert t2 > t1 + 10, "the script thread does not run in the child"
h.pwrite(b"background" * 100, 65536)
assert h.pread(1000, 65536) == b"background" * 100
for i in range(20):
    h.pread(4096, 4096 * i)
' || { cat "$tmpdir/log"; fail "the background server did not serve"; }
kill -TERM "$pid"
wait_for 10 ! -e "/proc/$pid" ||
  fail "the background server did not stop on SIGTERM"
cat "$tmpdir/log"
! grep -q error "$tmpdir/log" || fail "errors in the log"
echo "OK: the ruby plugin runs in the background"
