#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's asynchronous reads against a fake store that can be
# slowed, made to fail and killed (s3_fake_start):
#   - 32 reads in flight on objects that each answer after 1 s end in
#     about 1 s, with few server threads (the synchronous path needs a
#     worker per read in flight: ~19 threads and 2 s here);
#   - 403, 404 NoSuchKey (zeroes), 404 NoSuchBucket, 500 (retried, then
#     EIO) and a 500 once (the retry succeeds) reach the client exactly
#     as with -D nbdkit.async=0, for reads inside one object and across
#     two;
#   - a stalled store: reads in flight fail with EIO within timeout=
#     while another connection is served;
#   - the store killed with reads in flight: EIO at once, and once it
#     is back the next client is served;
#   - the client hanging up with reads in flight: the loop cancels
#     them, the server stays up and serves the next client.
# It would catch reads done on server threads, a loop that runs one
# GET at a time, a different error or missing retry on the loop, and a
# hang or crash on a stalled store or a hang-up.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
source "$srcdir/S3-helpers.sh"
s3_fake_start
fk="$tmpdir/fake"

# --- Overlap: 32 reads of 1 s each, in about 1 s, few threads.
echo "1 16" > "$fk/slow"
start_server "${fake_args[@]}" connections=32 timeout=10
out=$(t nbdsh -u "$uri" -c "
import os, time
bufs = [nbd.Buffer(4096) for i in range(32)]
t0 = time.monotonic()
for i in range(32):
    h.aio_pread(bufs[i], i * 32768)
time.sleep(0.5)
print('threads', len(os.listdir('/proc/$server_pid/task')))
while h.aio_in_flight() > 0:
    h.poll(-1)
print('tenths', int((time.monotonic() - t0) * 10))
for i in range(32):
    assert bufs[i].to_bytearray() == bytes([i // 2]) * 4096, i
")
echo "$out"
threads=$(echo "$out" | awk '$1 == "threads" { print $2 }')
tenths=$(echo "$out" | awk '$1 == "tenths" { print $2 }')
(( tenths < 17 )) || fail "32 reads of 1 s in flight took $tenths/10 s"
(( threads <= 8 )) || fail "$threads server threads with 32 reads in flight"
stop_server
echo "0 0" > "$fk/slow"

# --- Errors: the same outcome on both paths.  Eight reads in flight,
# the last four across two objects; each prints its errno or its bytes'
# first and last byte.
reads='
bufs = [nbd.Buffer(4096) for i in range(8)]
cookies = [h.aio_pread(bufs[i], 65536 * i + (8192 if i < 4 else 63488))
           for i in range(8)]
while h.aio_in_flight() > 0:
    h.poll(-1)
res = []
for i, c in enumerate(cookies):
    try:
        h.aio_command_completed(c)
        b = bufs[i].to_bytearray()
        res.append("%d-%d" % (b[0], b[-1]))
    except nbd.Error as e:
        res.append(e.errno)
print(" ".join(res))
'
declare -A want=(
  [200]="0-0 1-1 2-2 3-3 4-5 5-6 6-7 7-8"
  [500once]="0-0 1-1 2-2 3-3 4-5 5-6 6-7 7-8"
  [403]="EPERM EPERM EPERM EPERM EPERM EPERM EPERM EPERM"
  [404]="0-0 0-0 0-0 0-0 0-0 0-0 0-0 0-0"
  [404bucket]="EIO EIO EIO EIO EIO EIO EIO EIO"
  [500]="EIO EIO EIO EIO EIO EIO EIO EIO"
)
for status in 200 500once 403 404 404bucket 500; do
  for mode in async sync; do
    d=; [ $mode = sync ] && d="-D nbdkit.async=0"
    echo "$status" > "$fk/status"
    rm -f "$fk/gets"
    got=$(t "$NBDKIT" -U - $d "${fake_args[@]}" retries=1 \
            --run "nbdsh -u \"\$uri\" -c '$reads'" 2>"$tmpdir/err")
    echo "$status $mode: $got ($(wc -l < "$fk/gets") GETs)"
    [ "$got" = "${want[$status]}" ] ||
      fail "$status, $mode: got '$got', want '${want[$status]}'"
    # 12 GETs (of objects 0 to 8); 500: each tried twice
    # (retries=1); 500once: one retry per object.
    case $status in
      500) n=24 ;; 500once) n=21 ;; *) n=12 ;;
    esac
    [ "$(wc -l < "$fk/gets")" = $n ] ||
      fail "$status, $mode: $(wc -l < "$fk/gets") GETs, want $n"
    case $status in
      403|404bucket|500)
        grep -q "HTTP ${status%bucket}" "$tmpdir/err" ||
          fail "$status, $mode: the log does not name it: $(cat "$tmpdir/err")"
    esac
  done
done
echo 200 > "$fk/status"

# all_eio WHAT: Python that waits (10 s at most) for the eight reads
# in COOKIES to end, checks each failed with EIO and says how long
# that took from T0.
all_eio ()
{
  cat <<PY
while h.aio_in_flight() > 0:
    h.poll(1000)
    assert time.monotonic() - t0 < 10, "reads hang on $1"
for c in cookies:
    try:
        h.aio_command_completed(c)
        raise Exception("a read from $1 succeeded")
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
print("reads on $1 failed after %.1f s" % (time.monotonic() - t0))
PY
}
start_reads='
import os, signal, time
bufs = [nbd.Buffer(4096) for i in range(8)]
cookies = [h.aio_pread(bufs[i], 65536 * i) for i in range(8)]
'

# --- A stalled store: EIO within timeout=, other connections served.
echo "30 8" > "$fk/slow"
start_server "${fake_args[@]}" timeout=2 retries=0
t nbdsh -u "$uri" -c "$start_reads
time.sleep(0.3)
# Meanwhile a second connection reads an object that answers at once.
h2 = nbd.NBD()
h2.connect_uri(h.get_uri())
t0 = time.monotonic()
assert h2.pread(4096, 65536 * 9) == bytes([9]) * 4096
assert time.monotonic() - t0 < 1, 'the second connection waited'
t0 = time.monotonic()
$(all_eio 'a stalled store')"
stop_server

# --- The store killed with reads in flight: EIO soon; then served.
start_server "${fake_args[@]}" timeout=20 retries=2
t nbdsh -u "$uri" -c "$start_reads
time.sleep(0.5)
os.kill($fake, signal.SIGKILL)
t0 = time.monotonic()
$(all_eio 'a killed store')"
echo "0 0" > "$fk/slow"
s3_fake_start
t nbdsh -u "$uri" -c 'assert h.pread(4096, 65536 * 3) == bytes([3]) * 4096'
stop_server

# --- The client hangs up with 16 reads in flight: cancelled, no
# crash, the next client served.
echo "5 16" > "$fk/slow"
start_server -v "${fake_args[@]}" timeout=20 2> "$tmpdir/log"
t nbdsh -u "$uri" -c '
import os, time
bufs = [nbd.Buffer(4096) for i in range(16)]
for i in range(16):
    h.aio_pread(bufs[i], 65536 * i)
time.sleep(0.5)
os._exit(0)
' || :
for (( i = 0; i < 50; i++ )); do
  grep -q "requests cancelled" "$tmpdir/log" && break
  sleep 0.1
done
grep -q "requests cancelled" "$tmpdir/log" ||
  fail "the reads of a client that hung up were not cancelled"
grep "requests cancelled" "$tmpdir/log"
echo "0 0" > "$fk/slow"
t nbdsh -u "$uri" -c 'assert h.pread(4096, 65536 * 2) == bytes([2]) * 4096'
kill -0 "$server_pid" || fail "the server died"
