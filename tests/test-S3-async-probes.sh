#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's asynchronous reads seen by bpftrace, against a fake
# store whose objects answer after 0.5 s: 16 reads in flight on one
# connection are each handed over (request_submit) and completed
# (request_complete, error 0) on another thread than the worker that
# submitted; their 16 GETs (s3_request_start / s3_request_done) all run
# on that one plugin thread, carry the connection id and cookie of the
# read they serve (saved at hand-over: the loop thread has none), and
# at least 12 are in flight at once.  With -D nbdkit.async=0 nothing is
# submitted.  Then 8 partial writes in flight, two on each of objects 0
# to 3, with a pool of 2 connections: each fires s3_rmw once with its
# own id, cookie, object and range, and a GET and a PUT of its object
# on the loop thread with its id and cookie; those that waited for a
# connection fire s3_pool_wait with theirs.  It would catch reads or
# writes taken synchronously, requests run one at a time, and probes
# fired with the loop thread's ids (0) or another request's.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
so="$abs_top_builddir/plugins/S3/.libs/nbdkit-S3-plugin.so"
requires test -f "$so"
source "$srcdir/S3-helpers.sh"
s3_fake_start
echo "0.5 16" > "$tmpdir/fake/slow"

program="
usdt:$server_binary:nbdkit:request_submit {
  printf(\"%lld submit %d %d %d\\n\", nsecs, arg0, arg1, tid); }
usdt:$server_binary:nbdkit:request_complete {
  printf(\"%lld complete %d %d %d %d\\n\", nsecs, arg0, arg1, arg2, tid); }
usdt:$so:nbdkit:s3_request_start {
  printf(\"%lld get %d %d %d\\n\", nsecs, arg0, arg1, tid); }
usdt:$so:nbdkit:s3_request_done {
  printf(\"%lld got %d %d %d %d\\n\", nsecs, arg0, arg1, arg3, tid); }
"
reads='
bufs = [nbd.Buffer(4096) for i in range(16)]
for i in range(16):
    h.aio_pread(bufs[i], 65536 * i + 512)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(16):
    assert bufs[i].to_bytearray() == bytes([i]) * 4096, i
'

start_server "${fake_args[@]}" connections=16
trace_start "$tmpdir/out" "$program"
t nbdsh -u "$uri" -c "$reads"
trace_stop
stop_server
trace_in_order "$tmpdir/out" > "$tmpdir/got"
cat "$tmpdir/got"
awk '
  $1 == "submit" { k = $2 " " $3; s[k] = $4; ns++ }
  $1 == "complete" { k = $2 " " $3; nc++
    if (!(k in s)) { print "complete without submit: " k; bad = 1 }
    if ($4 != 0) { print "completed with error " $4; bad = 1 }
    if ($5 == s[k]) { print "completed on the submitting thread: " k; bad = 1 } }
  $1 == "get" { k = $2 " " $3; ng++; loop[$4] = 1; cur++
    if (cur > most) most = cur
    if (!(k in s)) { print "GET without a submitted read: " k; bad = 1 }
    for (x in s) if (s[x] == $4) { print "GET on a worker thread"; bad = 1 } }
  $1 == "got" { cur--
    if ($4 != 206) { print "GET answered " $4; bad = 1 } }
  END {
    nl = 0; for (x in loop) nl++
    printf "%d submitted, %d completed, %d GETs on %d threads, %d at once\n",
      ns, nc, ng, nl, most
    if (ns != 16 || nc != 16 || ng != 16) bad = 1
    if (nl != 1) { print "GETs on more than one thread"; bad = 1 }
    if (most < 12) { print "too few GETs in flight at once"; bad = 1 }
    exit bad
  }' "$tmpdir/got" || fail "the reads did not take the asynchronous path"

start_server -D nbdkit.async=0 "${fake_args[@]}" connections=16
trace_start "$tmpdir/out2" "$program"
t nbdsh -u "$uri" -c "$reads"
trace_stop
grep -q ' submit ' "$tmpdir/out2" && fail "-D nbdkit.async=0 submitted"
[ "$(grep -c ' get ' "$tmpdir/out2")" = 16 ] ||
  fail "not 16 GETs with -D nbdkit.async=0"

# --- Writes: s3_rmw, the GET and PUT of each, pool waits.
echo "0.2 16" > "$tmpdir/fake/slow"
wprogram="
usdt:$server_binary:nbdkit:request_submit {
  printf(\"%lld submit %d %d %d\\n\", nsecs, arg0, arg1, tid); }
usdt:$so:nbdkit:s3_rmw {
  printf(\"%lld rmw %d %d %d %d %d %d\\n\", nsecs, arg0, arg1, arg2, arg3,
         arg4, tid); }
usdt:$so:nbdkit:s3_request_start {
  printf(\"%lld req %d %d %s %s %d\\n\", nsecs, arg0, arg1, str(arg2),
         str(arg3), tid); }
usdt:$so:nbdkit:s3_pool_wait {
  printf(\"%lld wait %d %d\\n\", nsecs, arg0, arg1); }
"
start_server "${fake_args[@]}" connections=2
trace_start "$tmpdir/out3" "$wprogram"
t nbdsh -u "$uri" -c '
for i in range(8):
    h.aio_pwrite(bytes([i]) * 4096, 65536 * (i % 4) + 4096 * (i // 4) + 100)
while h.aio_in_flight() > 0:
    h.poll(-1)
'
trace_stop
t nbdsh -u "$uri" -c '
for i in range(8):
    assert h.pread(4096, 65536 * (i % 4) + 4096 * (i // 4) + 100) == \
        bytes([i]) * 4096, i
'
stop_server
trace_in_order "$tmpdir/out3" > "$tmpdir/got3"
cat "$tmpdir/got3"
awk '
  $1 == "submit" { k = $2 " " $3; s[k] = $4; ns++ }
  $1 == "rmw" { k = $2 " " $3; nr++
    if (!(k in s)) { print "s3_rmw without a submitted write: " k; bad = 1 }
    if (k in r) { print "two s3_rmw for " k; bad = 1 }
    r[k] = $4
    if ($6 != 4096 || $5 != 100 && $5 != 4196) { print "range " $5 " " $6; bad = 1 } }
  $1 == "req" && ($4 == "GET" || $4 == "PUT") { k = $2 " " $3
    if (!(k in s)) { print "request without a submitted write: " k; bad = 1 }
    else if (s[k] == $6) { print "request on the worker thread"; bad = 1 }
    n[$4]++; obj[k " " $4] = substr($5, length($5) - 15) + 0 }
  $1 == "wait" { nw++
    if (!($2 " " $3 in s)) { print "pool wait of no write"; bad = 1 } }
  END {
    for (k in r)
      if (obj[k " GET"] != r[k] || obj[k " PUT"] != r[k]) {
        print "object of " k ": rmw " r[k] ", GET " obj[k " GET"] \
          ", PUT " obj[k " PUT"]; bad = 1 }
    printf "%d writes, %d s3_rmw, %d GETs, %d PUTs, %d pool waits\n",
      ns, nr, n["GET"], n["PUT"], nw
    if (ns != 8 || nr != 8 || n["GET"] != 8 || n["PUT"] != 8) bad = 1
    if (nw < 1) { print "no pool wait with 2 connections"; bad = 1 }
    exit bad
  }' "$tmpdir/got3" || fail "the writes' probes are wrong"
