#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin's asynchronous path with requests in flight to a web
# server that fails them (tests/curl-stall-server.py answers HEAD, then
# never answers a GET), eight reads at once on connections=4 (four
# transfers, four waiting in the event loop's queue):
#  - stalled, timeout=2: every read fails with EIO within 10 s (two
#    rounds of the timeout), and the server serves the next client;
#  - killed while they are in flight (timeout=30): every read fails with
#    EIO within 5 s, long before the timeout;
#  - the client hangs up with them in flight (timeout=30): the plugin
#    cancels them at once ("requests cancelled" in the log, the
#    connection closed within 5 s), and the server serves the next
#    client.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo python3

# stall: start a stalling web server; sets $sport, and $spid to the
# pid of the server itself (not of timeout(1) running it).
stall ()
{
  local tpid
  rm -f "$tmpdir/port"
  timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-stall-server.py" \
    get "$tmpdir/port" 9>&- &
  tpid=$!
  cleanup_fn _kill_pid "$tpid"
  wait_for 10 -s "$tmpdir/port" || fail "the stall server did not start"
  sport="$(cat "$tmpdir/port")"
  spid="$(pgrep -P "$tpid" python3)" || fail "no stall server under $tpid"
}

# reads.py SOCKET [KILLPID]: send 8 reads together (and kill KILLPID
# 0.5 s later); each must fail with EIO.  Prints the time taken.
cat > "$tmpdir/reads.py" <<'PY'
import nbd, os, signal, sys, time
h = nbd.NBD()
h.connect_unix(sys.argv[1])
t0 = time.monotonic()
cookies = [h.aio_pread(nbd.Buffer(4096), 65536 * i) for i in range(8)]
killed = len(sys.argv) < 3
failed = 0
for c in cookies:
    while True:
        try:
            if h.aio_command_completed(c):
                raise AssertionError("a read from a failing server succeeded")
        except nbd.Error as e:
            assert e.errno == "EIO", e.errno
            failed += 1
            break
        if not killed and time.monotonic() - t0 > 0.5:
            os.kill(int(sys.argv[2]), signal.SIGKILL)
            killed = True
        h.poll(100)
print("%.3f" % (time.monotonic() - t0))
h.shutdown()
PY

# fail_all WHAT TIMEOUT MIN MAX [KILL]: the 8 reads against a new stall
# server fail with EIO in MIN to MAX seconds (the server killed 0.5 s
# in with KILL), and the next client is served.
fail_all ()
{
  local what="$1" secs="$2" min="$3" max="$4" took
  stall
  start_server curl "http://127.0.0.1:$sport/disk.img" timeout="$secs" \
    connections=4
  took=$(t python3 "$tmpdir/reads.py" "$sock" ${5:+"$spid"}) ||
    fail "$what: the reads did not all fail with EIO"
  echo "$what: $took s"
  awk -v e="$took" -v a="$min" -v b="$max" 'BEGIN { exit !(e >= a && e < b) }' ||
    fail "$what: the reads took $took s with timeout=$secs"
  [ "$(nbdinfo --size "$uri")" = 1048576 ] || fail "$what: no next client"
  stop_server
}
fail_all stalled 2 1.5 10
fail_all killed 30 0 5 kill

stall
start_server -v curl "http://127.0.0.1:$sport/disk.img" timeout=30 \
  connections=4 2> "$tmpdir/server.err"
t nbdsh -u "$uri" -c '
import time
for i in range(8):
    h.aio_pread(nbd.Buffer(4096), 65536 * i)
for i in range(5):
    h.poll(100)
assert h.aio_in_flight() == 8
' || fail "hang-up: the client failed"
for (( i = 0; i < 50; i++ )); do
  grep -q 'closed connection' "$tmpdir/server.err" && break
  sleep 0.1
done
grep -q 'closed connection' "$tmpdir/server.err" ||
  { cat "$tmpdir/server.err"; fail "hang-up: the connection did not close"; }
# Each event loop says how many of its requests it cancelled.
n=$(sed -n 's/.*connection 1 gone: \([0-9]*\) requests cancelled.*/\1/p' \
      "$tmpdir/server.err" | awk '{ n += $1 } END { print n + 0 }')
[ "$n" -eq 8 ] ||
  { cat "$tmpdir/server.err"; fail "hang-up: $n requests cancelled, not 8"; }
[ "$(nbdinfo --size "$uri")" = 1048576 ] || fail "hang-up: no next client"
stop_server
