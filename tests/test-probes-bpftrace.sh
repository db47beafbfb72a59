#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The probes fire under bpftrace: attach to usdt:SERVER:nbdkit:* and
# check the sequence connection_accept, handshake_done, request_start
# (the read's command and offset), request_done (its cookie, no error,
# 4096 bytes), connection_close for one connection id.  (bpftrace 0.17
# reads at most 6 probe arguments, arg0..arg5, on x86_64.)
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:connection_accept { printf("%llu accept %d\n", nsecs, arg0); }
usdt:$b:nbdkit:handshake_done { printf("%llu handshake_done %d\n", nsecs, arg0); }
usdt:$b:nbdkit:request_start {
  printf("%llu request_start %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$b:nbdkit:request_done {
  printf("%llu request_done %d %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3,
         arg4);
}
usdt:$b:nbdkit:connection_close { printf("%llu close %d\n", nsecs, arg0); }
BT
start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - memory 1M --run 'nbdsh -u "$uri" -c "h.pread(4096, 8192)"'
sleep 1
interrupt_tracer "$bt"
# bpftrace prints each CPU's events in turn, so lines from threads on
# different CPUs can come out of order: sort by the timestamp, drop it.
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
mv "$tmpdir/sorted" "$tmpdir/out"
cat "$tmpdir/out"

grep -Eq '^accept [0-9]+' "$tmpdir/out" || fail "connection_accept did not fire"
id="$(awk '/^accept/ { print $2; exit }' "$tmpdir/out")"
grep -q "^handshake_done $id\$" "$tmpdir/out" || fail "no handshake_done for $id"
cookie="$(awk -v id="$id" '$1 == "request_start" && $2 == id && $4 == 0 && $5 == 8192 { print $3; exit }' "$tmpdir/out")"
[ -n "$cookie" ] ||
  fail "no request_start for a read (command 0) at 8192 on connection $id"
grep -Eq "^request_done $id $cookie 0 0 4096\$" "$tmpdir/out" ||
  fail "no request_done for cookie $cookie: read, error 0, 4096 bytes"
grep -q "^close $id\$" "$tmpdir/out" || fail "no connection_close for $id"
# Order: accept before handshake_done before request_start before close.
awk -v id="$id" '
  $1 == "accept" && $2 == id { a = NR }
  $1 == "handshake_done" && $2 == id { h = NR }
  $1 == "request_start" && $2 == id && !r { r = NR }
  $1 == "close" && $2 == id { c = NR }
  END { exit !(a < h && h < r && r < c) }' "$tmpdir/out" ||
  fail "probes fired out of order"
