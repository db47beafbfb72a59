#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# wait_start and wait_done under bpftrace: requests made to wait for
# real, each lock in turn, and the requests that do not wait.
#  1. serialize_all_requests, reads that take 600 ms (the delay
#     filter): connection B's read, sent 0.2 s after connection A's,
#     waits for it on "serialize_all" with its own (id, cookie), about
#     0.4 s; A's read fires no wait.
#  2. serialize_connections: a second client, 0.2 s after the first,
#     waits before its handshake on "serialize_conn" (cookie 0) until
#     the first, whose read takes 600 ms, is gone; seen through
#     tools/nbdkit-trace's waits view, which also counts the waits.
#  3. parallel: one read alone fires no wait probe at all; then slow
#     writes grow the pool, and 4 MiB reads that the client does not
#     read back for 0.5 s leave one worker blocked writing its reply:
#     the other read replies wait on "write" with their cookies, about
#     as long, and idle workers wait on "read" with cookie 0.
# Every wait_start has its wait_done.  Would catch: a lock taken
# without the probes, a probe with the wrong id, cookie or time, or
# probes fired when nothing waits.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

b="$server_binary"
program="
usdt:$b:nbdkit:wait_start { printf(\"%llu ws %d %d %s\n\", nsecs, arg0, arg1, str(arg2)); }
usdt:$b:nbdkit:wait_done { printf(\"%llu wd %d %d %s %d\n\", nsecs, arg0, arg1, str(arg2), arg3); }
usdt:$b:nbdkit:request_start { printf(\"%llu rs %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:connection_accept { printf(\"%llu accept %d\n\", nsecs, arg0); }
usdt:$b:nbdkit:connection_close { printf(\"%llu close %d\n\", nsecs, arg0); }"

# trace_until_closed N: wait (bounded) until N connections have closed,
# stop the tracer, leave its lines in time order in $tmpdir/got.
trace_until_closed ()
{
  local i
  for (( i = 0; i < 300; i++ )); do
    [ "$(grep -Ec '^[0-9]+ close ' "$tmpdir/out")" -ge "$1" ] && break
    sleep 0.1
  done
  trace_stop
  trace_in_order "$tmpdir/out" > "$tmpdir/got"
  cat "$tmpdir/got"
}

# pairs LOCK: every wait_start on LOCK has its wait_done.
pairs ()
{
  awk -v lock="$1" '
    $4 == lock && $1 == "ws" { n[$2 " " $3]++ }
    $4 == lock && $1 == "wd" { n[$2 " " $3]-- }
    END { for (k in n) if (n[k]) { print "unpaired " lock ": " k; bad = 1 }
          exit bad }' "$tmpdir/got" || fail "wait_start/wait_done unpaired"
}

# ---- 1. serialize_all ----
start_server --filter=noparallel --filter=delay memory 1M \
  serialize=all-requests rdelay=600ms
trace_start "$tmpdir/out" "$program"
# B's first read makes its next cookie differ from A's.
t nbdsh -u "$uri" -c '
import time
b = nbd.NBD()
b.connect_uri(h.get_uri())
b.pread(512, 0)
c1 = h.aio_pread(nbd.Buffer(512), 0)
time.sleep(0.2)
c2 = b.aio_pread(nbd.Buffer(512), 4096)
assert (c1, c2) == (1, 2), (c1, c2)
while h.aio_in_flight() > 0:
    h.poll(-1)
while b.aio_in_flight() > 0:
    b.poll(-1)
b.shutdown()
h.shutdown()'
trace_until_closed 2
stop_server
# B is the connection that sent cookie 2; A the other one.
B="$(awk '$1 == "rs" && $3 == 2 { print $2; exit }' "$tmpdir/got")"
A="$(awk -v b="$B" '$1 == "accept" && $2 != b { print $2; exit }' \
        "$tmpdir/got")"
[ -n "$B" ] && [ -n "$A" ] || fail "connections not found"
grep -qx "ws $B 2 serialize_all" "$tmpdir/got" ||
  fail "no wait_start ($B, 2, serialize_all)"
ns="$(awk -v b="$B" '$1 == "wd" && $2 == b && $3 == 2 &&
                     $4 == "serialize_all" { print $5 }' "$tmpdir/got")"
[ -n "$ns" ] || fail "no wait_done ($B, 2, serialize_all)"
(( ns > 100000000 && ns < 2000000000 )) ||
  fail "serialize_all wait of $ns ns, not about 0.4 s"
# A's read was first at the lock; its only waits may be at close.
if awk -v a="$A" '$1 ~ /^w/ && $2 == a && $3 != 0' "$tmpdir/got" | grep .
then
  fail "connection $A's request waited"
fi
pairs serialize_all

# ---- 2. serialize_conn, through nbdkit-trace's waits view ----
start_server --filter=noparallel --filter=delay memory 1M \
  serialize=connections rdelay=600ms
start_tool "$tmpdir/waits" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" waits
t nbdsh -u "$uri" -c 'h.pread(512, 0)' &
first=$!
sleep 0.2
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
wait "$first"
interrupt_tracer "$tool"
stop_server
cat "$tmpdir/waits"
# TIME CONN COOKIE REQUEST LOCK WAIT_us: connection 2 (ids start at 1
# in each server) waited, and only it.
awk '$1 ~ /^[0-9]+$/ {
       n++
       if ($2 == 2 && $3 == 0 && $4 == "-" && $5 == "serialize_conn" &&
           $6 > 100000 && $6 < 2000000) ok++ }
     END { exit !(n == 1 && ok == 1) }' "$tmpdir/waits" ||
  fail "not one serialize_conn wait of connection 2 of about 0.4 s"
grep -q '^@waits\[serialize_conn\]: 1$' "$tmpdir/waits" ||
  fail "no @waits[serialize_conn]: 1"

# ---- 3. parallel: nothing waits, then write and read ----
start_server --threads 8 --filter=delay memory 64M wdelay=20ms
trace_start "$tmpdir/out" "$program"
t nbdsh -u "$uri" -c '
import time
h.pread(512, 0)
time.sleep(0.3)
# Slow writes (off the CPU) grow the pool.
for i in range(8):
    h.aio_pwrite(b"x" * 4096, i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
# Replies of 4 MiB fill the socket while the client sleeps.
bufs = [nbd.Buffer(4 << 20) for i in range(8)]
cs = [h.aio_pread(bufs[i], i << 22) for i in range(8)]
assert cs == list(range(10, 18)), cs
time.sleep(0.5)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()'
trace_until_closed 1
# The lone read (cookie 1), until the first write: no wait.
if awk '$1 == "rs" && $3 == 2 { exit } $1 ~ /^w[sd]$/' "$tmpdir/got" | grep .
then
  fail "a wait probe fired with one request in flight"
fi
awk '
  $1 == "wd" && $4 == "write" && $3 >= 10 && $3 <= 17 && $5 > 250000000 {
    long++ }
  $1 == "wd" && $4 == "read" { if ($3 == 0) reads++; else bad = 1 }
  # Replies to the writes may wait too; 0 is for held replies.
  $1 == "wd" && $4 == "write" && ($3 == 1 || $3 > 17) { bad = 1 }
  END { printf "long write waits %d, read waits %d\n", long, reads
        exit !(long >= 1 && reads >= 1 && !bad) }' "$tmpdir/got" ||
  fail "write and read waits wrong"
pairs write
pairs read

# ---- 4. the asynchronous path: room for more requests in flight ----
# Reads take 300 ms and the plugin takes 4 at a time: the connection
# reads no fifth request until one is answered, a wait on "in_flight"
# with cookie 0 (the next request is not read yet).  With the default
# bound (256) the same 8 reads wait for nothing.
for bound in 4 0; do
  args=(example-async size=1M delay=300 loop=server)
  [ "$bound" -gt 0 ] && args+=(max-in-flight=$bound)
  start_server "${args[@]}"
  trace_start "$tmpdir/out" "$program"
  t nbdsh -u "$uri" -c '
buf = nbd.Buffer(512)
cs = [h.aio_pread(buf, i * 512) for i in range(8)]
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()'
  trace_until_closed 1
  stop_server
  if [ "$bound" -gt 0 ]; then
    awk '
      $1 == "wd" && $4 == "in_flight" {
        if ($3 != 0) bad = 1
        if ($5 > 150000000 && $5 < 2000000000) long++ }
      END { printf "in_flight waits of about 0.3 s: %d\n", long
            exit !(long >= 1 && !bad) }' "$tmpdir/got" ||
      fail "no in_flight wait of about 0.3 s with cookie 0"
    pairs in_flight
  elif grep -E '^[0-9]+ w[sd] .* in_flight' "$tmpdir/got"; then
    fail "in_flight waits with room for 256 requests"
  fi
done

# ---- 5. the payload budget ----
# 20 reads of 32 MiB that take 500 ms each: the pool grows to run them
# all, but one connection's requests in flight hold at most 512 MiB of
# buffers, so the 17th waits on "payload", with its own cookie, until
# one before it is answered.
start_server -t 64 --filter=delay memory 1G rdelay=500ms
trace_start "$tmpdir/out" "$program"
t nbdsh -u "$uri" -c '
buf = nbd.Buffer(32 << 20)
cs = [h.aio_pread(buf, i << 25) for i in range(20)]
assert cs == list(range(1, 21)), cs
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()'
trace_until_closed 1
stop_server
awk '
  $1 == "wd" && $4 == "payload" {
    if ($3 < 1 || $3 > 20) bad = 1
    if ($5 > 250000000 && $5 < 5000000000) long++ }
  END { printf "payload waits of about 0.5 s: %d\n", long
        exit !(long >= 1 && !bad) }' "$tmpdir/got" ||
  fail "no payload wait of about 0.5 s by one of the reads"
pairs payload
