#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The pause filter's probes: pause_paused (requests in flight when 'p'
# came) and pause_resumed (requests held during the pause).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$(filter_so pause)"
ctl="$tmpdir/ctl"
start_server --filter=pause --filter=delay memory 1M pause-control="$ctl" \
  rdelay=1
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:pause_paused {
  printf(\"paused %d\\n\", arg0);
}
usdt:$so:nbdkit:pause_resumed {
  printf(\"resumed %d\\n\", arg0);
}"
t nbdsh -c - <<PY
import socket, time
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("$ctl")
c.settimeout(20)
# One request per connection: each connection has a worker of its own,
# so the requests really are in flight (or held) side by side.
hs = []
for i in range(5):
    x = nbd.NBD()
    x.connect_uri("$uri")
    hs.append(x)
def pump(handles, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for x in handles:
            x.poll(10)
# Two reads in flight (1 s each in the delay filter) when pausing ...
for x in hs[:2]:
    x.aio_pread(nbd.Buffer(512), 0)
pump(hs[:2], 0.3)
c.sendall(b"p"); assert c.recv(1) == b"P"
# ... and three held while paused.
for x in hs[2:]:
    x.aio_pread(nbd.Buffer(512), 0)
pump(hs, 1)
c.sendall(b"r"); assert c.recv(1) == b"R"
for x in hs:
    while x.aio_in_flight() > 0:
        x.poll(1000)
    x.shutdown()
PY
sleep 0.5
trace_stop
cat "$out"
printf '%s\n' "paused 2" "resumed 3" > "$tmpdir/expected"
grep -E '^(paused|resumed) ' "$out" | diff -u "$tmpdir/expected" - ||
  fail "unexpected probe output"
