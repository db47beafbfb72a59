#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's asynchronous writes, zeroes, trims and flushes
# against the fake store (s3_fake_start, which keeps what is PUT):
#   - a mix in flight at once (16 adjacent 4 KiB pieces of one object,
#     a whole object, a write across two objects, zeroes of part of an
#     object and of whole objects, a trim, a flush) reads back as the
#     model says, on that connection and through -D nbdkit.async=0; and
#     the same mix written with -D nbdkit.async=0 reads back the same
#     through the asynchronous path;
#   - 16 whole-object writes to a store that answers after 1 s end in
#     about 1 s, with few server threads;
#   - errors (403, QuotaExceeded, 404 NoSuchKey, 404 NoSuchBucket,
#     500 retried, 500 once) reach the client as the same NBD errors,
#     after the same HTTP requests, as with -D nbdkit.async=0, and so
#     does a store that is not there;
#   - a client hanging up with writes in flight on one object (one
#     running, the rest waiting for its lock): all cancelled, and the
#     object's lock is free for the next client.
# It would catch a read-modify-write that loses a concurrent write to
# the same object, wrong bytes or objects, writes run on server
# threads or one at a time, a different error than the synchronous
# path, and a lock leaked or a hang on cancel.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
source "$srcdir/S3-helpers.sh"
s3_fake_start
fk="$tmpdir/fake"

# --- The mix, and the model of what the disk then holds.
model='
K = 65536
img = bytearray(b"".join(bytes([n]) * K for n in range(16)))
def w(off, data):
    img[off:off + len(data)] = data
'
mix="$model"'
import os
pieces = [os.urandom(4096) for i in range(16)]
for i in range(16):
    w(3 * K + 4096 * i, pieces[i])
    h.aio_pwrite(pieces[i], 3 * K + 4096 * i)
whole = os.urandom(K)
w(5 * K, whole)
h.aio_pwrite(whole, 5 * K)
across = os.urandom(100000)
w(8 * K + 30000, across)
h.aio_pwrite(across, 8 * K + 30000)
w(6 * K + 100, bytes(1000))
h.aio_zero(1000, 6 * K + 100)
w(10 * K, bytes(2 * K))
h.aio_zero(2 * K, 10 * K)
w(12 * K, bytes(2 * K))                   # only whole objects go
h.aio_trim(2 * K + 5000, 12 * K - 1000)
h.aio_flush()
while h.aio_in_flight() > 0:
    h.poll(-1)
assert h.pread(16 * K, 0) == img, "read back on the same connection"
open("'"$tmpdir"'/model", "wb").write(img)
'
readall='assert h.pread(16 * 65536, 0) == open("'"$tmpdir"'/model", "rb").read()'

for first in async sync; do
  if [ $first = async ]; then a=; b="-D nbdkit.async=0"
  else a="-D nbdkit.async=0"; b=; fi
  t "$NBDKIT" -U - $a "${fake_args[@]}" --run "nbdsh -u \"\$uri\" -c '$mix'" ||
    fail "the mix written ($first) did not read back"
  t "$NBDKIT" -U - $b "${fake_args[@]}" --run "nbdsh -u \"\$uri\" -c '$readall'" ||
    fail "the mix written ($first) read through the other path differs"
  # 16 read-modify-writes of object 3, one after the other.
  [ "$(grep -c '^PUT 3$' "$fk/log")" = 16 ] ||
    fail "$first: $(grep -c '^PUT 3$' "$fk/log") PUTs of object 3, want 16"
  echo "the mix written $first reads back on both paths"
  kill $fake; wait $fake || :
  rm -f "$fk/log" "$fk/gets"
  s3_fake_start
done

# --- Overlap: 16 whole-object writes of 1 s each, in about 1 s.
echo "1 16" > "$fk/slow"
start_server "${fake_args[@]}" connections=16 timeout=10
out=$(t nbdsh -u "$uri" -c "
import os, time
t0 = time.monotonic()
for i in range(16):
    h.aio_pwrite(bytes([100 + i]) * 65536, 65536 * i)
time.sleep(0.5)
print('threads', len(os.listdir('/proc/$server_pid/task')))
while h.aio_in_flight() > 0:
    h.poll(-1)
print('tenths', int((time.monotonic() - t0) * 10))
")
echo "$out"
threads=$(echo "$out" | awk '$1 == "threads" { print $2 }')
tenths=$(echo "$out" | awk '$1 == "tenths" { print $2 }')
(( tenths < 17 )) || fail "16 writes of 1 s in flight took $tenths/10 s"
(( threads <= 8 )) || fail "$threads server threads with 16 writes in flight"
stop_server
echo "0 0" > "$fk/slow"

# --- Errors: the same outcome and requests on both paths.  A whole
# write (object 1), a part (2), zeroes in a part (3), a trim of a
# whole object (4), in flight together.
reqs='
cookies = [h.aio_pwrite(b"a" * 65536, 65536), h.aio_pwrite(b"b" * 10, 131072),
           h.aio_zero(10, 196608), h.aio_trim(65536, 262144)]
while h.aio_in_flight() > 0:
    h.poll(-1)
res = []
for c in cookies:
    try:
        h.aio_command_completed(c)
        res.append("ok")
    except nbd.Error as e:
        res.append(e.errno)
print(" ".join(res))
'
declare -A want=(
  [500once]="ok ok ok ok"
  [403]="EPERM EPERM EPERM EPERM"
  [quota]="ENOSPC ENOSPC ENOSPC ENOSPC"
  [404]="EIO EIO ok ok"
  [404bucket]="EIO EIO EIO EIO"
  [500]="EIO EIO EIO EIO"
  [nostore]="EIO EIO EIO EIO"
)
for status in 500once 403 quota 404 404bucket 500 nostore; do
  # nostore: the store is killed once the server is up.
  pre=
  for mode in async sync; do
    d=; [ $mode = sync ] && d="-D nbdkit.async=0"
    # Written anew for each mode, so that 500once starts over.
    if [ $status = nostore ]; then
      echo 200 > "$fk/status"
    else
      echo "$status" > "$fk/status"
    fi
    [ $status = nostore ] && pre="import os, signal; os.kill($fake, signal.SIGKILL)"
    rm -f "$fk/log"
    touch "$fk/log"
    got=$(t "$NBDKIT" -U - $d "${fake_args[@]}" retries=1 connect-timeout=2 \
            --run "nbdsh -u \"\$uri\" -c '$pre
$reqs'" 2>"$tmpdir/err")
    [ $status = nostore ] && { wait $fake || :; s3_fake_start; }
    sort "$fk/log" > "$tmpdir/log.$mode"
    echo "$status $mode: $got ($(wc -l < "$fk/log") requests)"
    [ "$got" = "${want[$status]}" ] ||
      fail "$status, $mode: got '$got', want '${want[$status]}'"
  done
  cmp "$tmpdir/log.async" "$tmpdir/log.sync" ||
    fail "$status: other requests than the synchronous path's"
done

# --- The client hangs up with 8 writes in flight on object 0 (one
# running, 7 waiting for its lock): all cancelled, the lock free.
echo "3 1" > "$fk/slow"
start_server -v "${fake_args[@]}" timeout=20 2> "$tmpdir/log"
t nbdsh -u "$uri" -c '
import os, time
for i in range(8):
    h.aio_pwrite(b"c" * 4096, 4096 * i)
time.sleep(0.5)
os._exit(0)
' || :
for (( i = 0; i < 50; i++ )); do
  grep -q "requests cancelled" "$tmpdir/log" && break
  sleep 0.1
done
grep "requests cancelled" "$tmpdir/log" ||
  fail "the writes of a client that hung up were not cancelled"
grep -q ": 8 requests cancelled" "$tmpdir/log" ||
  fail "not all 8 writes were cancelled"
echo "0 0" > "$fk/slow"
t nbdsh -u "$uri" -c '
import time
t0 = time.monotonic()
h.pwrite(b"d" * 4096, 8192)
assert time.monotonic() - t0 < 2, "the lock of object 0 was held"
assert h.pread(4096, 8192) == b"d" * 4096
'
kill -0 "$server_pid" || fail "the server died"
