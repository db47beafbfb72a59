#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=time-limit: a client's requests succeed until its time is up,
# then fail with ESHUTDOWN, every one of them; a client that connects
# later gets its full time; the limit takes nbdkit_parse_delay's forms;
# zero and nonsense are refused.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server --filter=time-limit memory 1M time-limit=800ms
URI="$uri" t nbdsh -u "$uri" -c - <<'PY'
import os, time
t0 = time.monotonic()
h.pwrite(b"hello", 0)
assert h.pread(5, 0) == b"hello"
# A second client, connected 0.5 s later, is not cut off with the first.
time.sleep(max(0, 0.5 - (time.monotonic() - t0)))
h2 = nbd.NBD()
h2.connect_uri(os.environ["URI"])
t1 = time.monotonic()
time.sleep(max(0, 0.9 - (time.monotonic() - t0)))
for fn in (lambda: h.pread(5, 0), lambda: h.pwrite(b"x", 0),
           lambda: h.flush(), lambda: h.zero(512, 0)):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "ESHUTDOWN", e.errno
    else:
        raise AssertionError("a request past the limit succeeded")
# h2 is still within its 0.8 s (unless this machine stalled).
if time.monotonic() - t1 < 0.7:
    assert h2.pread(5, 0) == b"hello"
h2.shutdown()
PY
# A new client: its full time again.
t nbdsh -u "$uri" -c 'assert h.pread(5, 0) == b"hello"'
stop_server

for bad in time-limit=0 time-limit=0ms time-limit=soon time-limit=-1; do
  refuses time-limit --filter=time-limit memory 1M "$bad" ||
    fail "$bad was accepted"
done
t "$NBDKIT" -U - --filter=time-limit memory 1M time-limit=2.5s --run true ||
  fail "time-limit=2.5s was refused"
