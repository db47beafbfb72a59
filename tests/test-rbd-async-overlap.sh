#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin takes the asynchronous path and keeps many requests in
# flight on few threads, seen by bpftrace: an nbdcopy out of the image
# with 64 requests in flight, against a server with two worker threads
# (-t 2), fires request_submit and request_complete in pairs for every
# read, with at least 16 reads in librbd at once (each rbd_op_done's
# end less its latency to its end), and each rbd_op_done (fired on
# librbd's thread) carries the (id, cookie) of a request submitted
# before it and completed after it.  With -D nbdkit.async=0 no
# request_submit fires and at most two reads are in librbd at once,
# which shows the overlap measured is the asynchronous path's.  Would
# catch: the plugin not exporting its asynchronous callbacks, a
# callback that waits for librbd, ids lost on librbd's thread.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy
source "$srcdir/rbd-functions.sh"
requires sh -c "readelf -n '$rbd_so' | grep -q 'Name: rbd_op_done'"
img=$(new_image overlap 16M)
head -c 16M /dev/urandom > "$tmpdir/src"
t "$NBDKIT" -U - rbd "${rbd_args[@]}" image="$img" \
  --run 'nbdcopy "'"$tmpdir"'/src" "$uri"' || fail "filling the image failed"
requires_tracer

b="$server_binary"
cat > "$tmpdir/trace.bt" <<EOT
usdt:$b:nbdkit:request_submit {
  printf("%llu submit %d %d %d\n", nsecs, arg0, arg1, arg2); }
usdt:$b:nbdkit:request_complete {
  printf("%llu complete %d %d %d\n", nsecs, arg0, arg1, arg2); }
usdt:$rbd_so:nbdkit:rbd_op_done {
  printf("%llu op %d %d %s %d %d %d\n", nsecs, arg0, arg1, str(arg2), arg3,
         arg4, arg5); }
EOT

# trace FLAGS...: copy the image out through a server started with
# FLAGS, under bpftrace, into $tmpdir/out; the events in $tmpdir/trace.
trace ()
{
  start_bpftrace 90 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"
  t "$NBDKIT" "$@" -t 2 -U - rbd "${rbd_args[@]}" image="$img" \
    --run 'nbdcopy --connections=1 --requests=64 --request-size=65536 \
             "$uri" "'"$tmpdir"'/out"' || fail "$*: nbdcopy failed"
  sleep 1
  interrupt_tracer "$bt"
}

# in_flight: how many requests were submitted, and the most reads in
# librbd at once (from rbd_op_done: its time less its latency, to its
# time); checks that each op joins a request in flight, if any was.
in_flight ()
{
  /usr/bin/python3 - "$tmpdir/trace" <<'PY'
import sys
ops, sub, comp = [], {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4 or not f[0].isdigit():
        continue
    t, kind, key = int(f[0]), f[1], (f[2], f[3])
    if kind == "submit":
        sub[key] = t
    elif kind == "complete":
        comp[key] = t
    elif kind == "op" and f[4] == "read":
        ops.append((key, t - int(f[7]), t))
if sorted(sub) != sorted(comp):
    sys.exit("request_submit and request_complete do not pair")
ev = []
for key, start, end in ops:
    if sub and not (key in sub and sub[key] <= end <= comp[key]):
        sys.exit("rbd_op_done of %s is not within its request" % (key,))
    ev += [(start, 1), (end, -1)]
n = most = 0
for t, d in sorted(ev):
    n += d
    most = max(most, n)
print(len(sub), len(ops), most)
PY
}

# measure NAME FLAGS...: trace a copy through a server with FLAGS; sets
# n (requests submitted), reads (rbd_op_done reads) and most (reads in
# librbd at once); checks the copy's bytes.
measure ()
{
  local name=$1 out
  shift
  rm -f "$tmpdir/out"
  trace "$@"
  out=$(in_flight 2>&1) || fail "$name: $out"
  read -r n reads most <<< "$out"
  echo "$name: $n requests submitted, $reads reads," \
       "at most $most in librbd at once"
  [ "$reads" -ge 256 ] || fail "$name: $reads reads traced, want 256"
  cmp -n $((16 * 1024 * 1024)) "$tmpdir/src" "$tmpdir/out" ||
    fail "$name: the copy has other bytes"
}

measure async
[ "$n" -ge 256 ] || fail "async: $n requests went the asynchronous way, want 256"
[ "$most" -ge 16 ] || fail "async: at most $most reads in librbd at once"

measure sync -D nbdkit.async=0
[ "$n" -eq 0 ] || fail "-D nbdkit.async=0: $n requests went the asynchronous way"
[ "$most" -le 2 ] || fail "-D nbdkit.async=0: $most reads at once on two threads"
