#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's asynchronous reads under valgrind memcheck, against
# the fake store: reads in flight that complete, reads that fail (403),
# and a client that hangs up with 16 reads and 4 writes on one object
# in flight on objects that answer after 3 s (cancelled: one running,
# three waiting for its lock), then another client served (reads,
# writes to one object, a zero), then the server's exit.  Any memory error or definite leak (an op or job not
# freed on cancel, say) makes the server exit 119.
source "$(dirname "$0")/functions.sh"
requires_cmd valgrind nbdsh
skip_under_sanitizers "valgrind cannot run a sanitizer-instrumented binary"
source "$srcdir/S3-helpers.sh"
s3_fake_start
export NBDKIT_VALGRIND=1 NBDKIT_VALGRIND_LOG="$tmpdir/vg.%p"
TEST_CMD_TIMEOUT=120
echo "3 16" > "$tmpdir/fake/slow"

status=0
t "$NBDKIT" -U - -v "${fake_args[@]}" timeout=20 --run "
nbdsh -u \"\$uri\" -c '
import os, time
bufs = [nbd.Buffer(4096) for i in range(16)]
for i in range(16):
    h.aio_pread(bufs[i], 65536 * i)
for i in range(4):
    h.aio_pwrite(b\"w\" * 4096, 65536 * 2 + 4096 * i)
time.sleep(1)
os._exit(0)
' || :
echo '0 0' > '$tmpdir/fake/slow'
nbdsh -u \"\$uri\" -c '
bufs = [nbd.Buffer(70000) for i in range(8)]
for i in range(8):
    h.aio_pread(bufs[i], 65536 * i + 1000)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(8):
    assert bufs[i].to_bytearray()[0] == i
    assert bufs[i].to_bytearray()[-1] == i + 1
open(\"$tmpdir/fake/status\", \"w\").write(\"403\")
try:
    h.pread(4096, 0)
    raise Exception(\"a read answered 403 succeeded\")
except nbd.Error as e:
    assert e.errno == \"EPERM\", e.errno
open(\"$tmpdir/fake/status\", \"w\").write(\"200\")
for i in range(4):
    h.aio_pwrite(b\"x\" * 1000, 65536 * 3 + 1000 * i)
h.aio_zero(65536, 65536 * 4)
while h.aio_in_flight() > 0:
    h.poll(-1)
assert h.pread(4000, 65536 * 3) == b\"x\" * 4000
assert h.pread(65536, 65536 * 4) == bytes(65536)
'" 2> "$tmpdir/log" || status=$?
grep "requests cancelled" "$tmpdir/log" ||
  fail "the hung-up client's reads were not cancelled"
if [ "$status" -ne 0 ]; then
  tail -20 "$tmpdir/log"
  for f in "$tmpdir"/vg.*; do
    grep -Eq 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$f" && cat "$f"
  done
  fail "status $status (119: valgrind errors)"
fi
