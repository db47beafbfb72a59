#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's pool of connections and its timeout, against a fake
# store (a small Python HTTP server) that answers each object GET after
# a delay it reads from a file: with connections=4, four reads in
# flight (once the server runs several workers) take one delay, not
# four, and so does one read that covers four objects; with
# connections=1 the same four reads queue; a store
# slower than timeout= gives EIO in about timeout= seconds and the
# server serves again when the store does.  It would catch a pool that
# serialises requests, a read that fetches its objects one after the
# other, and a missing or ignored timeout.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

echo 1 > "$tmpdir/delay"
port=$(free_port)
/usr/bin/python3 - "$port" "$tmpdir" <<'PY' 9>&- &
import http.server, re, sys, time
port, d = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if "list-type=2" in self.path:
            body = b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"
            self.send_response(200)
        else:
            # Object N (the last 16 hex digits of the path) is all byte N.
            n = int(self.path[-16:], 16)
            a, b = map(int, re.match(r"bytes=(\d+)-(\d+)",
                                     self.headers["Range"]).groups())
            time.sleep(float(open(d + "/delay").read()))
            body = bytes([n]) * (b - a + 1)
            self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
s.daemon_threads = True
open(d + "/listening", "w").write("yes")
s.serve_forever()
PY
fake=$!
cleanup_fn _kill_pid $fake
wait_for 10 -s "$tmpdir/listening" || fail "the fake store did not start"

args=(S3 endpoint-url=http://127.0.0.1:$port access-key=a secret-key=b
      bucket=b key=d size=1M object-size=64K)

# elapsed CMD...: run CMD, print the seconds it took, in tenths.
elapsed ()
{
  local t0 t1
  t0=$(date +%s%N)
  "$@" >&2
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 100000000 ))
}
# The server starts a connection with one worker and adds workers as
# slow requests keep coming (server/workers.c): 24 quick-ish reads in
# flight first, then four reads of 1 s each, timed in the same
# connection (printed in tenths of a second).
four_reads="
import time
def reads(n, delay):
    open('$tmpdir/delay', 'w').write(str(delay))
    bufs = [nbd.Buffer(4096) for i in range(n)]
    for i in range(n):
        h.aio_pread(bufs[i], (i % 4) * 65536)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for i in range(n):
        assert bufs[i].to_bytearray() == bytes([i % 4]) * 4096, i
reads(24, 0.05)
t0 = time.monotonic()
reads(4, 1)
print(int((time.monotonic() - t0) * 10))
"
one_read='assert h.pread(4 * 65536, 0) == b"".join(bytes([i]) * 65536 for i in range(4))'

start_server "${args[@]}" connections=4 timeout=10
tenths=$(t nbdsh -u "$uri" -c "$four_reads")
echo "four reads, 4 connections: $tenths/10 s"
(( tenths < 25 )) || fail "four reads in flight took $tenths/10 s, not ~1"
echo 1 > "$tmpdir/delay"
tenths=$(elapsed t nbdsh -u "$uri" -c "$one_read")
echo "one read of four objects: $tenths/10 s"
(( tenths < 25 )) || fail "a read of four objects took $tenths/10 s, not ~1"
stop_server

start_server "${args[@]}" connections=1 timeout=10
tenths=$(t nbdsh -u "$uri" -c "$four_reads")
echo "four reads, 1 connection: $tenths/10 s"
(( tenths >= 35 )) || fail "four reads on one connection took $tenths/10 s"
stop_server

# A store slower than the timeout: EIO after ~1 s, and back to work.
start_server "${args[@]}" timeout=1 retries=0
echo 20 > "$tmpdir/delay"
tenths=$(elapsed t nbdsh -u "$uri" -c '
try:
    h.pread(512, 0)
    raise Exception("a read from a silent store succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
')
echo "a read past its timeout failed after $tenths/10 s"
(( tenths < 50 )) || fail "timeout=1 took $tenths/10 s to fail a read"
echo 0 > "$tmpdir/delay"
t nbdsh -u "$uri" -c 'assert h.pread(512, 65536) == b"\x01" * 512' ||
  fail "the server did not serve again"
