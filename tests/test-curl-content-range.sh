#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin checks a partial reply's Content-Range against the
# bytes it asked for: a server that answers 206 with the range one byte
# late (tests/curl-range-server.py with SKEW 1) gets every read failed
# with EIO and a log line saying what was asked and what came (it used
# to be accepted: each read one byte off, and the client got success);
# the server stays up; the curl_bad_range probe fires with the offset
# and count asked for and the range sent.  The same server without the
# skew serves the right bytes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

img="$tmpdir/disk.img"
head -c 1048576 /dev/urandom > "$img"
serve ()
{
  rm -f "$tmpdir/port"
  timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-range-server.py" \
    "$img" "$tmpdir/port" "$1" 2> "$tmpdir/http.log" 9>&- &
  cleanup_fn _kill_pid $!
  wait_for 10 -s "$tmpdir/port" || fail "the range server did not start"
  url="http://127.0.0.1:$(cat "$tmpdir/port")/disk.img"
}

serve 0
start_server curl "$url"
t nbdsh -u "$uri" -c "
want = open('$img', 'rb').read()
assert h.pread(4096, 8192) == want[8192:8192 + 4096]
assert h.pread(65536, 1000) == want[1000:1000 + 65536]
"
stop_server

serve 1
start_server -v curl "$url" 2> "$tmpdir/server.err"
trace=
if [ "$(id -u)" = 0 ] && command -v bpftrace >/dev/null &&
   grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"; then
  tracing_lock
  so="$abs_top_builddir/plugins/curl/.libs/nbdkit-curl-plugin.so"
  timeout -k 30 60 bpftrace -e "usdt:$so:nbdkit:curl_bad_range {
    printf(\"bad %d %d %d %d\\n\", arg2, arg3, arg4, arg5); }" \
    > "$tmpdir/trace" 2> "$tmpdir/trace.err" &
  trace=$!
  cleanup_fn _kill_pid "$trace"
  wait_for_bpftrace "$trace" "$tmpdir/trace" "$tmpdir/trace.err"
fi
t nbdsh -u "$uri" -c '
for off in (8192, 1000):
    try:
        h.pread(4096, off)
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
    else:
        raise AssertionError("a read of the wrong range succeeded")
'
[ "$(nbdinfo --size "$uri")" = 1048576 ] || fail "the server did not stay up"
grep -q 'asked for bytes 8192-12287, the server sent 8193-12288' \
  "$tmpdir/server.err" || { cat "$tmpdir/server.err"; fail "no log line"; }
if [ -n "$trace" ]; then
  sleep 0.5
  interrupt_tracer "$trace"
  cat "$tmpdir/trace"
  grep -qx 'bad 8192 4096 8193 12288' "$tmpdir/trace" ||
    fail "curl_bad_range did not fire with the ranges"
  grep -qx 'bad 1000 4096 1001 5096' "$tmpdir/trace" ||
    fail "curl_bad_range did not fire for the second read"
fi
stop_server
