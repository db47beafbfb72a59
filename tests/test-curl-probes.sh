#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin's probes, seen by bpftrace attached to its .so, and
# what they show: with connections=4 range requests overlap in time
# and use four handles; with connections=1 they never overlap and
# requests wait for the pool.  nginx is slowed (limit_rate) so each
# request lasts long enough to overlap.  Checked: curl_size (url, 200,
# size), curl_range_start (id and cookie set, GET, offset/count in the
# file) and curl_range_done (same id and cookie, status 206, bytes =
# count, latency > 0, curl code 0), curl_pool_wait (handle < N),
# curl_script (id 0, cookie 0, header, iteration 0, exit 0) at
# start-up, and with header-script-renew=1 (connections=1, reads sent
# after 1.1 s) a later run in a request's thread, with the id and
# cookie of a range request that follows it.  The probes fire before
# and after the server listens, so bpftrace watches the .so for every
# process and lines are told apart by pid.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_tracer nbdsh

so="$abs_top_builddir/plugins/curl/.libs/nbdkit-curl-plugin.so"
[ -f "$so" ] || fail "$so not built"
mkdir -p "$tmpdir/www"
size=$(( 24 * 65536 ))
head -c "$size" /dev/urandom > "$tmpdir/www/four.img"
cp "$tmpdir/www/four.img" "$tmpdir/www/one.img"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    limit_rate 512k;"

cat > "$tmpdir/trace.bt" <<EOF
usdt:$so:nbdkit:curl_size { printf("size %d %s %d %d\n", pid, str(arg0), arg1, arg2); }
usdt:$so:nbdkit:curl_range_start {
  printf("start %d %lld %d %d %s %d %d\n", pid, nsecs, arg0, arg1, str(arg2),
         arg3, arg4); }
usdt:$so:nbdkit:curl_range_done {
  printf("done %d %lld %d %d %d %d %d %d\n", pid, nsecs, arg0, arg1, arg2,
         arg3, arg4, arg5); }
usdt:$so:nbdkit:curl_pool_wait {
  printf("wait %d %d %d %d %d\n", pid, arg0, arg1, arg2, arg3); }
usdt:$so:nbdkit:curl_script {
  printf("script %d %d %d %s %d %d %d\n", pid, arg0, arg1, str(arg2), arg3,
         arg4 > 0, arg5); }
EOF
start_bpftrace 100 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

# 24 reads of 64 KiB sent at once on one NBD connection.  (The
# server starts a connection with one worker and adds workers while
# requests keep waiting, so the first few run one at a time.)
read_all='
cmds = [h.aio_pread(nbd.Buffer(65536), i * 65536) for i in range(24)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cmds:
    assert h.aio_command_completed(c)
'
# With connections=1 the script is renewed after 1 s: the client waits
# that long first, so that the first read finds it due (the reads are
# all handed to the plugin at once, within the second).
export read_all pause
for n in four one; do
  c=4 renew=0 pause=0; [ "$n" = one ] && c=1 renew=1 pause=1.1
  t "$NBDKIT" -U - curl "http://127.0.0.1:$port/$n.img" connections=$c \
    header-script='echo X-Test: probes' header-script-renew=$renew \
    --run 'sleep $pause; nbdsh -u "$uri" -c "$read_all"' ||
    fail "connections=$c: the copy failed"
done
sleep 1
interrupt_tracer "$bt"

# pid_of NAME: the pid whose curl_size named NAME.img.
pid_of () { awk -v u="/$1.img" '$1 == "size" && index($3, u) { print $2 }' \
              "$tmpdir/trace"; }
p4="$(pid_of four)" p1="$(pid_of one)"
[ -n "$p4" ] && [ -n "$p1" ] ||
  { cat "$tmpdir/trace" "$tmpdir/trace.err"; fail "no curl_size lines"; }
grep -q "^size $p4 http://127.0.0.1:$port/four.img 200 $size\$" \
  "$tmpdir/trace" || fail "curl_size has the wrong arguments"
grep -q "^script $p4 0 0 header 0 1 0\$" "$tmpdir/trace" ||
  fail "no curl_script (id 0, cookie 0, header, iteration 0, exit 0)"
# A renewed run is charged to a request: its id and cookie are those of
# a range request of the same server.
awk -v p="$p1" '$2 != p { next }
  $1 == "script" && $3 > 0 && $4 > 0 && $5 == "header" && $6 > 0 &&
    $8 == 0 { s[$3 " " $4] }
  $1 == "start" { r[$4 " " $5] }
  END { for (k in s) if (k in r) ok = 1; exit !ok }' "$tmpdir/trace" ||
  fail "no renewed curl_script with the id and cookie of a range request"

# Each range request: a start (id, cookie > 0, GET, inside the file)
# and a done with the same id and cookie (206, bytes = the start's
# count, ns > 0, curl code 0).  "pid id cookie" names a request.
awk -v s="$size" '
  $1 == "start" { k = $2 " " $4 " " $5
    if ($4 < 1 || $5 < 1 || $6 != "GET" || $7 + $8 > s) { print "bad:", $0; bad = 1 }
    count[k] = $8; nstart++ }
  $1 == "done" { k = $2 " " $4 " " $5
    if (!(k in count) || $6 != 206 || $7 != count[k] || $8 <= 0 || $9 != 0)
      { print "bad:", $0; bad = 1 }
    ndone++ }
  END { if (bad || nstart == 0 || nstart != ndone) exit 1 }' "$tmpdir/trace" ||
  fail "curl_range_start/done lines with wrong arguments"
for p in "$p4" "$p1"; do
  got=$(awk -v p="$p" '$1 == "done" && $2 == p { b += $7 } END { print b + 0 }' \
        "$tmpdir/trace")
  [ "$got" -eq "$size" ] || fail "pid $p read $got bytes, not $size"
done

# most_in_flight PID: the largest number of that pid's range requests
# in flight at one instant (from its start to its done).
most_in_flight ()
{
  awk -v p="$1" '$2 == p && $1 == "start" { print $3, 1 }
                 $2 == p && $1 == "done" { print $3, -1 }' "$tmpdir/trace" |
    sort -n -k1,1 -k2,2n |
    awk '{ n += $2; if (n > m) m = n } END { print m + 0 }'
}
m4="$(most_in_flight "$p4")" m1="$(most_in_flight "$p1")"
echo "in flight at once: connections=4: $m4, connections=1: $m1"
[ "$m4" -ge 3 ] || fail "connections=4: at most $m4 requests overlapped"
[ "$m1" -eq 1 ] || fail "connections=1: $m1 requests overlapped"

handles4=$(awk -v p="$p4" '$1 == "wait" && $2 == p { print $6 }' \
             "$tmpdir/trace" | sort -u | tr '\n' ' ')
handles1=$(awk -v p="$p1" '$1 == "wait" && $2 == p { print $6 }' \
             "$tmpdir/trace" | sort -u | tr '\n' ' ')
echo "handles: connections=4: $handles4; connections=1: $handles1"
[ "$handles4" = "0 1 2 3 " ] || fail "connections=4 used handles $handles4"
[ "$handles1" = "0 " ] || fail "connections=1 used handles $handles1"
# With one handle and requests queued, some waited for it (more than
# 10 ms, a fraction of one slowed transfer).
awk -v p="$p1" '$1 == "wait" && $2 == p && $5 > 10000000 { w = 1 }
  END { exit !w }' "$tmpdir/trace" ||
  fail "connections=1: no request waited for the pool"
