#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Clients of the file plugin's io_uring path that hang up with requests
# in flight (direct=true aio=io_uring): the server does not crash, closes each
# handle only after its last completion (the plugin says "closed with N
# requests in flight" otherwise), gives back each connection's ring and
# descriptors (the server's count of descriptors comes back to where it
# was), and keeps serving.  (Not under valgrind: valgrind 3.19 hangs
# a server that uses io_uring, even one connection reading 4 KiB.)
source "$(dirname "$0")/functions.sh"
requires_cmd /usr/bin/python3
source "$(dirname "$0")/file-io-uring-setup.sh"
head -c $(( 64 * 1048576 )) /dev/urandom > "$dir/disk"

# Send N reads and N writes of 1 MiB (and a flush), let the server take
# them in, and vanish without NBD_CMD_DISC.
cat > "$tmpdir/hangup.py" <<'PY'
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
n = int(sys.argv[2])
bufs = [nbd.Buffer(1 << 20) for i in range(n)]
for i, b in enumerate(bufs):
    h.aio_pread(b, (i % 32) << 20)
    h.aio_pwrite(b"w" * (1 << 20), (32 + i % 32) << 20)
h.aio_flush()
for i in range(5):
    h.poll(1)
os._exit(0)
PY

fds () { ls "/proc/$server_pid/fd" | wc -l; }

start_server -v file "$dir/disk" direct=true aio=io_uring 2> "$tmpdir/log"
# One connection first, so that what the server makes once is there
# before the count; it has ended when its ring's descriptor is gone.
t /usr/bin/python3 "$tmpdir/hangup.py" "$uri" 1
sleep 1
before=$(fds)
for i in 1 2 3 4 5; do
  t /usr/bin/python3 "$tmpdir/hangup.py" "$uri" 32
done
# Every connection ends once its requests have completed.
for (( i = 0; i < 100; i++ )); do
  [ "$(fds)" -eq "$before" ] && break
  sleep 0.1
done
grep -E 'io_uring|error' "$tmpdir/log" || :
kill -0 "$server_pid" || fail "the server died"
! grep -q 'closed with' "$tmpdir/log" ||
  fail "the plugin was closed with requests in flight"
[ "$(grep -c 'aio=io_uring' "$tmpdir/log")" -eq 6 ] ||
  fail "not 6 connections through io_uring"
after=$(fds)
[ "$after" -eq "$before" ] ||
  fail "the server had $before descriptors before and $after after"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 4096, 0)
assert h.pread(4096, 0) == b"x" * 4096
assert h.pread(3, 4094) == b"xx" + h.pread(1, 4096)
'
stop_server

:
