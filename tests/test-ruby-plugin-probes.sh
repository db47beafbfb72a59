#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ruby plugin's probes under bpftrace: ruby_call_start and
# ruby_call_done fire around each method of the script it calls, with the
# connection id, the request's cookie (the one request_start gave that
# read; 0 for open), the method's name, a duration, and for a
# failed method the errno and message; the script's Nbdkit.probe fires
# the server's user probe with its name, integers and text.  It would
# catch: probes fired with the wrong cookie (another thread's), a
# missing done probe on the error path, errno or message lost, the
# probe helper not registered or its arguments shifted.
source "$(dirname "$0")/functions.sh"
# libruby cannot run under ASan/LSan: Ruby's own thread (the timer
# thread) carries a dynamic TLS vector LSan's leak scan cannot walk
# (its tracer dies: "Tracer caught signal 11" in DTLS), and Ruby
# replaces each thread's alternate signal stack, which ASan owns.
skip_under_sanitizers "libruby: LSan cannot scan Ruby's threads"
requires_cmd bpftrace nbdsh
requires_root
requires_probes
tracing_lock

so="$abs_top_builddir/plugins/ruby/.libs/nbdkit-ruby-plugin.so"
[ -f "$so" ] || fail "$so not built"
b="$server_binary"
script="$tmpdir/probe.rb"
cat > "$script" <<'RUBY'
def open(readonly) :h end
def get_size(h) 1048576 end
def pread(h, count, offset)
  if offset == 8192
    Nbdkit.set_error(Errno::ENOSPC)
    raise "disk full"
  end
  Nbdkit.probe("rbscript_read", count, -offset, "read #{count} at #{offset}")
  sleep 0.002
  "\0".b * count
end
RUBY

start_server ruby "$script"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:request_start {
  printf(\"%llu start %d %d %d\n\", nsecs, arg0, arg1, arg5);
}
usdt:$so:nbdkit:ruby_call_start {
  printf(\"%llu cstart %d %d %s\n\", nsecs, arg0, arg1, str(arg2));
}
usdt:$so:nbdkit:ruby_call_done {
  printf(\"%llu cdone %d %d %s %d %d [%s]\n\", nsecs, arg0, arg1, str(arg2),
         arg3 > 1000000, arg4, str(arg5));
}
usdt:$b:nbdkit:user {
  printf(\"%llu user %d %d %s %d %d [%s]\n\", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}"
t nbdsh -u "$uri" -c '
h.pread(512, 4096)
try:
    h.pread(512, 8192)
    raise Exception("the read at 8192 did not fail")
except nbd.Error as e:
    assert e.errno == "ENOSPC", e.errno
' || fail "nbdsh failed under bpftrace"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
cat "$tmpdir/sorted"

set -- $(awk '$1 == "cstart" && $4 == "open"' "$tmpdir/sorted")
[ "$#" -eq 4 ] || fail "no ruby_call_start for open"
id=$2
[ "$id" -gt 0 ] && [ "$3" -eq 0 ] || fail "open: id $id, cookie $3"
grep -q "^cdone $id 0 open [01] 0 \[\]\$" "$tmpdir/sorted" ||
  fail "no ruby_call_done for open"
cookie_at ()
{
  awk -v id="$id" -v off="$1" '$1 == "start" && $2 == id && $4 == off { print $3 }' \
    "$tmpdir/sorted"
}
c1="$(cookie_at 4096)"
c2="$(cookie_at 8192)"
[ -n "$c1" ] && [ -n "$c2" ] || fail "no request_start for the reads"
grep -q "^cstart $id $c1 pread\$" "$tmpdir/sorted" ||
  fail "no ruby_call_start for the read at 4096 (cookie $c1)"
grep -q "^cdone $id $c1 pread 1 0 \[\]\$" "$tmpdir/sorted" ||
  fail "no ruby_call_done (> 1 ms, errno 0) for the read at 4096"
grep -q "^user $id $c1 rbscript_read 512 -4096 \[read 512 at 4096\]\$" \
  "$tmpdir/sorted" || fail "no user probe from Nbdkit.probe"
# The message is cut at bpftrace's string length (64 bytes).
grep -Fq "cdone $id $c2 pread 0 28 [RuntimeError: disk full ($tmpdir" "$tmpdir/sorted" ||
  fail "no ruby_call_done with ENOSPC and the message for the read at 8192"
echo "OK: the ruby plugin's probes"
