#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# An upstream that dies or stalls with asynchronous requests in flight
# in the nbd plugin: every one of them fails, quickly, and the server
# goes on serving.
#  - 32 reads and 16 writes in flight (the upstream holds each 3 s),
#    then the upstream is killed: all 48 fail with EIO within 2 s of
#    the kill, the server is up, a read sent afterwards on the same
#    connection fails with EIO at once, and once the upstream is back
#    a new client reads and writes;
#  - an upstream that holds reads 30 s, with request-timeout=1: 16
#    reads in flight all fail with EIO within 5 s, and writes (which
#    that upstream does not hold) still work on a new connection.
# Catches: a request left hanging when libnbd drops the connection, a
# completion that never reaches the server, a poller that stops
# driving the socket, request-timeout= lost on the asynchronous path.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd python3 nbdsh

# The client: N reads and N/2 writes in flight, then "sent" on stdout;
# then it waits (30 s at most) for all to complete and prints how many
# failed with which error and the seconds since "sent".  With a third
# argument it then tries one more read.
cat > "$tmpdir/inflight.py" <<'PY'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
n = int(sys.argv[2])
errs = {}
def done(err):
    k = nbd.Error("", err.value).errno if err.value else "ok"
    errs[k] = errs.get(k, 0) + 1
    return 1
bufs = [nbd.Buffer(4096) for i in range(n)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096, lambda e: done(e))
for i in range(n // 2):
    h.aio_pwrite(bytearray(b"w" * 4096), 1048576 + i * 4096, lambda e: done(e))
t0 = time.monotonic()
while time.monotonic() - t0 < 0.3:
    h.poll(10)                  # let every request leave
print("sent", flush=True)
t0 = time.monotonic()
while h.aio_in_flight() > 0 and time.monotonic() - t0 < 30:
    h.poll(100)
print("left %d %s after %.2f" % (h.aio_in_flight(),
      ",".join("%s=%d" % kv for kv in sorted(errs.items())),
      time.monotonic() - t0), flush=True)
if len(sys.argv) > 3:
    try:
        h.pread(512, 0)
        print("then ok")
    except nbd.Error as e:
        print("then", e.errno)
PY

up_args=(-t 64 --filter=delay memory 4M delay-read=3 delay-write=3)
start_upstream "${up_args[@]}"
start_server nbd socket="$up_sock"
t python3 "$tmpdir/inflight.py" "$uri" 32 again > "$tmpdir/out" 2>&1 &
client=$!
wait_for_output "$tmpdir/out" '^sent' "$client" 20 ||
  { cat "$tmpdir/out"; fail "the client did not send its requests"; }
kill -9 "$up_pid"
wait "$up_pid" 2>/dev/null || :
wait "$client" || { cat "$tmpdir/out"; fail "the client failed"; }
cat "$tmpdir/out"
read -r _ left errs _ secs < <(grep '^left' "$tmpdir/out")
[ "$left" = 0 ] || fail "$left requests still in flight 30 s after the kill"
[ "$errs" = EIO=48 ] || fail "the requests ended with $errs, not EIO=48"
awk -v s="$secs" 'BEGIN { exit !(s < 2) }' ||
  fail "the requests took $secs s to fail"
grep -qx 'then EIO' "$tmpdir/out" || fail "a read after the kill did not fail with EIO"
kill -0 "$server_pid" || fail "the server died with its upstream"

start_upstream memory 4M
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 4096, 0)
assert h.pread(4096, 0) == b"x" * 4096' ||
  fail "no working connection once the upstream was back"
stop_server
stop_upstream

start_upstream -t 64 --filter=delay memory 4M delay-read=30
start_server nbd socket="$up_sock" request-timeout=1
t python3 "$tmpdir/inflight.py" "$uri" 16 > "$tmpdir/out" 2>&1 ||
  { cat "$tmpdir/out"; fail "the client failed"; }
cat "$tmpdir/out"
read -r _ left errs _ secs < <(grep '^left' "$tmpdir/out")
[ "$left" = 0 ] || fail "request-timeout=1: $left requests still in flight"
case "$errs" in
  EIO=16,ok=8) ;;
  *) fail "request-timeout=1: the requests ended with $errs, not EIO=16,ok=8" ;;
esac
awk -v s="$secs" 'BEGIN { exit !(s < 5) }' ||
  fail "request-timeout=1: the reads took $secs s to fail"
kill -0 "$server_pid" || fail "the server died after a request timed out"
t nbdsh -u "$uri" -c 'h.pwrite(b"y" * 512, 0); h.flush()' ||
  fail "no working connection after a request timed out"
