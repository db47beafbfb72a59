#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --busy-poll: its range, and what polling may cost.  A client that
# sends a request every 20 ms (longer than the 10 ms window) would keep
# the server polling half the time if every wait polled; the server
# must notice that its windows run out and mostly sleep instead.  Then
# the bytes still come back right with polling off and with the
# largest window.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

for bad in x -1 10001 "" 5us; do
  if "$NBDKIT" --busy-poll="$bad" memory 1M > "$tmpdir/out" 2>&1; then
    fail "--busy-poll=\"$bad\" was accepted"
  fi
  cat "$tmpdir/out"
  grep -q "busy-poll: \"$bad\" is not a number of microseconds from 0 to 10000" \
    "$tmpdir/out" || fail "no range message for --busy-poll=\"$bad\""
done

# 100 requests 20 ms apart against a 10 ms window: 2 s of wall time.
# Polling every wait would cost about 100 windows, 1 s of CPU; resting
# after POLL_MISSES (4) misses costs a few windows per 68 waits.
start_server --busy-poll=10000 memory 1M
pid="$(cat "$pidfile")"
t nbdsh -u "$uri" -c "
import time
def cpu():
    f = open('/proc/$pid/stat').read().rsplit(')', 1)[1].split()
    return int(f[11]) + int(f[12])
h.pwrite(b'a' * 4096, 0)
c0 = cpu()
for i in range(100):
    time.sleep(0.02)
    assert h.pread(4096, 0) == b'a' * 4096
used = cpu() - c0
print('server CPU over 100 sparse requests: %d ticks' % used)
assert used < 40, 'the server polled through its idle time: %d ticks' % used
"
stop_server

for opt in --busy-poll=0 --busy-poll=10000; do
  start_server "$opt" memory 4M
  t nbdsh -u "$uri" -c "
import os
data = os.urandom(1 << 20)
for off in range(0, 4 << 20, 1 << 20):
    h.pwrite(data, off)
# QD1 and 16 in flight, read back.
for off in range(0, 4 << 20, 65536):
    assert h.pread(65536, off) == data[off % (1 << 20):][:65536]
bufs = [(nbd.Buffer(4096), off) for off in range(12288, 4 << 20, 262144)]
for b, off in bufs:
    h.aio_pread(b, off)
while h.aio_in_flight() > 0:
    h.poll(-1)
for b, off in bufs:
    assert b.to_bytearray() == data[off % (1 << 20):][:4096]
" || fail "data wrong with $opt"
  stop_server
done
