#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=pause: 'p' on the control socket is answered 'P' only once
# the requests in flight have finished, requests sent while paused are
# held until 'r' (answered 'R'), other bytes are answered 'X', and the
# held requests then complete with the right data.  A missing or bad
# pause-control exits 1 naming it.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

ctl="$tmpdir/ctl"
# The delay filter below makes each read take 1 s, so that a read can
# be caught in flight.
start_server --filter=pause --filter=delay memory 1M pause-control="$ctl" \
  rdelay=1
[ -S "$ctl" ] || fail "no control socket at $ctl"
t nbdsh -u "$uri" -c - <<PY
import socket, time
h.pwrite(b"held data", 0)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("$ctl")
c.settimeout(20)
def command(b):
    t0 = time.monotonic()
    c.sendall(b)
    return c.recv(1), time.monotonic() - t0
def wait_done(cookie, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        h.poll(100)
        if h.aio_command_completed(cookie):
            return True
    return False

# Unknown commands are answered X.
r, _ = command(b"x")
assert r == b"X", r
r, _ = command(b"\n")
assert r == b"X", r

# A read in flight (1 s in the delay filter) holds up the pause.
buf = nbd.Buffer(9)
cookie = h.aio_pread(buf, 0)
time.sleep(0.2)
r, d = command(b"p")
assert r == b"P", r
assert d >= 0.5, "P came %g s after p, before the read in flight ended" % d
assert h.aio_command_completed(cookie) or wait_done(cookie, 5)
assert buf.to_bytearray() == b"held data"

# While paused, new requests are held.
buf2 = nbd.Buffer(9)
cookie = h.aio_pread(buf2, 0)
assert not wait_done(cookie, 1.5), "a read completed while paused"
r, _ = command(b"p")            # pausing again changes nothing
assert r == b"P", r
r, _ = command(b"r")
assert r == b"R", r
assert wait_done(cookie, 10), "the held read did not complete after r"
assert buf2.to_bytearray() == b"held data"
r, _ = command(b"r")            # resuming again changes nothing
assert r == b"R", r
c.close()

# A second control connection works too.
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("$ctl")
c.settimeout(20)
assert command(b"p")[0] == b"P"
assert command(b"r")[0] == b"R"
c.close()
PY
stop_server
[ ! -e "$ctl" ] || fail "the control socket was not removed at exit"

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses pause-control --filter=pause memory 1M "$@" ||
    fail "$*: not refused with one line naming pause-control"
}
bad
bad pause-control=
bad pause-control="$tmpdir/$(printf 'x%.0s' {1..120})"
bad pause-control="$tmpdir/no/such/dir/sock"
