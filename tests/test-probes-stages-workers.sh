#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# worker_start and worker_stop under bpftrace.  With --threads 3 and
# reads that each take 20 ms (the delay filter: slow, and off the CPU),
# the connection's pool grows from its one worker to three: worker_start
# must fire for workers 0, 1 and 2 of the connection, each naming the
# thread model ("parallel") and the most workers (3); worker_stop must
# fire for each at the end, and the requests they report must add up
# to connection_close's count.  Would catch: a worker that starts without the probe, a
# wrong model or limit, a per-worker count that loses requests.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

start_server --threads 3 --filter=delay memory 1M delay-read=20ms
b="$server_binary"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:worker_start { printf(\"%llu start %d %d %s %d\n\", nsecs, arg0, arg1, str(arg2), arg3); }
usdt:$b:nbdkit:worker_stop { printf(\"%llu stop %d %d %d\n\", nsecs, arg0, arg1, arg2); }
usdt:$b:nbdkit:connection_close { printf(\"%llu close %d %d\n\", nsecs, arg0, arg2); }"

# 6 rounds of 8 reads in flight: 48 slow reads grow the pool to 3.
t nbdsh -u "$uri" -c '
for r in range(6):
    bufs = [nbd.Buffer(4096) for i in range(8)]
    cookies = [h.aio_pread(bufs[i], i * 4096) for i in range(8)]
    while h.aio_in_flight() > 0:
        h.poll(-1)
h.shutdown()'
trace_stop_at_close

id="$(awk '$1 == "close" && $3 == 48 { print $2; exit }' "$tmpdir/got")"
[ -n "$id" ] || fail "no connection_close with 48 requests"
awk -v id="$id" '
  $2 != id { next }
  $1 == "start" { started[$3] = 1; n++
                  if ($4 != "parallel" || $5 != 3) { print "bad: " $0; bad = 1 } }
  $1 == "stop" { if (!($3 in started)) { print "stop unstarted: " $0; bad = 1 }
                 stopped++; sum += $4 }
  $1 == "close" { total = $3 }
  END {
    printf "started %d, stopped %d, requests %d of %d\n", n, stopped, sum, total
    exit !(!bad && n == 3 && (0 in started) && (1 in started) &&
           (2 in started) && stopped == 3 && sum == total)
  }' "$tmpdir/got" ||
  fail "worker_start/worker_stop wrong for connection $id"

