#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# timeout= against web servers that stall (tests/curl-stall-server.py):
# one that never answers stops the curl plugin at start-up, with one
# line, within the timeout (not at libcurl's defaults, minutes away);
# one that answers the size request and then stalls every GET gives the
# client EIO after about the timeout, and the server stays up and
# answers the next client.  A header script that hangs is killed after
# the timeout.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

# stall MODE: start a stalling server, set $sport.
stall ()
{
  rm -f "$tmpdir/port"
  timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-stall-server.py" \
    "$1" "$tmpdir/port" 9>&- &
  cleanup_fn _kill_pid $!
  wait_for 10 -s "$tmpdir/port" || fail "the stall server did not start"
  sport="$(cat "$tmpdir/port")"
}

stall all
start=$SECONDS status=0
t "$NBDKIT" -U - curl "http://127.0.0.1:$sport/disk.img" timeout=2 \
  --run 'exit 0' 2> "$tmpdir/err" || status=$?
took=$(( SECONDS - start ))
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
[ "$(grep -c error "$tmpdir/err")" -eq 1 ] || fail "not one error line"
grep -Eq '^nbdkit: curl: error: .*([Tt]imeout|timed out)' "$tmpdir/err" ||
  fail "the error does not say timeout"
[ "$took" -le 10 ] || fail "start-up took $took s with timeout=2"

stall get
start_server curl "http://127.0.0.1:$sport/disk.img" timeout=2
t nbdsh -u "$uri" -c '
import time
assert h.get_size() == 1048576
t0 = time.monotonic()
try:
    h.pread(4096, 0)
    raise Exception("a read from a stalled server succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
took = time.monotonic() - t0
assert 1.5 < took < 10, took
' || fail "a stalled read did not fail with EIO after the timeout"
t nbdinfo --size "$uri" > /dev/null || fail "the server no longer answers"

# A header script that hangs is killed after the timeout too.
start=$SECONDS status=0
t "$NBDKIT" -U - curl "http://127.0.0.1:$sport/disk.img" timeout=2 \
  header-script='sleep 60' --run 'exit 0' 2> "$tmpdir/err" || status=$?
took=$(( SECONDS - start ))
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "a hanging script: exit status $status"
grep -q '^nbdkit: curl: error: header-script: killed after 2 seconds' \
  "$tmpdir/err" || fail "a hanging script: not the error expected"
[ "$took" -le 10 ] || fail "a hanging script held start-up for $took s"
