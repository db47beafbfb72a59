#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's probes, against radosgw, seen by bpftrace: a 4 KiB
# write into a missing object fires s3_rmw (object 1, offset 100,
# 4096) and two requests (s3_request_start, then s3_request_done), a
# GET answered 404 and a PUT of the whole 64 KiB object answered 200;
# a read fires a GET with its offset in the object, its bytes and 206;
# all with the connection id and the cookie of the client's request (as
# the server's request_start shows it) and a latency.  With connections=1, eight
# reads in flight make some wait: s3_pool_wait.  It would catch a
# probe that is missing, fires with arguments out of place, or is not
# joined to its client request.
source "$(dirname "$0")/functions.sh"
requires_root
requires_probes
requires_cmd bpftrace nbdsh curl
so="$abs_top_builddir/plugins/S3/.libs/nbdkit-S3-plugin.so"
requires test -f "$so"
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket probes
tracing_lock

export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
export AWS_REGION="$S3_REGION"
start_server S3 endpoint-url="$S3_ENDPOINT" bucket="$bucket" key=disk \
  size=1M object-size=64K connections=1
trace_start "$tmpdir/trace" "
usdt:$server_binary:nbdkit:request_start {
  printf(\"%lld start %d %d\\n\", nsecs, arg1, arg3); }
usdt:$so:nbdkit:s3_request_start {
  printf(\"%lld req %d %d %s %s %d %d\\n\", nsecs, arg0 > 0, arg1,
         str(arg2), str(arg3), arg4, arg5); }
usdt:$so:nbdkit:s3_request_done {
  printf(\"%lld done %d %d %s %d %d %d\\n\", nsecs, arg0 > 0, arg1,
         str(arg2), arg3, arg4, arg5 > 0); }
usdt:$so:nbdkit:s3_rmw {
  printf(\"%lld rmw %d %d %d %d %d\\n\", nsecs, arg0 > 0, arg1, arg2, arg3,
         arg4); }
usdt:$so:nbdkit:s3_pool_wait {
  printf(\"%lld wait %d %d\\n\", nsecs, arg0 > 0, arg2 > 0); }"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 4096, 65536 + 100)
assert h.pread(1000, 65536 + 50) == bytes(50) + b"x" * 950
cmds = [h.aio_pread(nbd.Buffer(4096), i * 65536) for i in range(8)]
while h.aio_in_flight() > 0:
    h.poll(-1)
'
trace_stop
trace_in_order "$tmpdir/trace" > "$tmpdir/got"
cat "$tmpdir/got"

wcookie=$(awk '$1 == "start" && $3 == 65636 { print $2 }' "$tmpdir/got")
rcookie=$(awk '$1 == "start" && $3 == 65586 { print $2 }' "$tmpdir/got")
[ -n "$wcookie" ] && [ -n "$rcookie" ] ||
  fail "request_start of the write or the read not seen"
o=disk/0000000000000001
grep -qx "rmw 1 $wcookie 1 100 4096" "$tmpdir/got" ||
  fail "no s3_rmw (1, $wcookie, object 1, 100, 4096)"
# Each thread's requests are one after another, so in the trace (in
# time order) each start of a cookie is followed by its done.
pairs="$(awk '$1 == "req" { s[$3] = $2 " " $3 " " $4 " " $5 " " $6 " " $7 }
              $1 == "done" { print s[$3], "->", $5, $6, $7 }' "$tmpdir/got")"
echo "$pairs"
# The write's read of object 1 (64 KiB asked, 404, an error body).
grep -Eqx "1 $wcookie GET $o 0 65536 -> 404 [0-9]+ 1" <<<"$pairs" ||
  fail "no GET of object 1 answered 404 for the write"
grep -qx "1 $wcookie PUT $o 0 65536 -> 200 65536 1" <<<"$pairs" ||
  fail "no PUT of object 1 (65536 bytes) answered 200"
grep -qx "1 $rcookie GET $o 50 1000 -> 206 1000 1" <<<"$pairs" ||
  fail "no GET of 1000 bytes at 50 in object 1 answered 206 for the read"
grep -qx "wait 1 1" "$tmpdir/got" ||
  fail "no s3_pool_wait with 8 reads in flight on one connection"
