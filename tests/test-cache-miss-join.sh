#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A cache miss joins its request: the cache filter's cache_miss and
# cache_hit carry (connection id, cookie) first, the same pair as the
# server's request_start for the read that caused them.  Connection A
# reads a block never read (a miss), then the same block again (with
# cache-on-read, a hit); connection B reads another block (a miss).
# Each event must carry the id and cookie of its own read: A's miss
# those of A's first read, A's hit those of A's second, B's miss those
# of B's read, and B's id is not A's.  Then, where the file plugin has
# io_uring, the same for a miss the filter decides as the read is
# passed on to an asynchronous plugin (cache-on-read off).  Only arg0
# and arg1 of request_start are read (its later arguments are not this
# test's).
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so cache)"
start_server --filter=cache memory 1M cache-on-read=true
out="$tmpdir/trace"
# Reads only (command 0): the handshake sends none of them.
trace_start "$out" "
usdt:$server_binary:nbdkit:request_start /arg2 == 0/ {
  printf(\"start %d %d\\n\", arg0, arg1); }
usdt:$so:nbdkit:cache_miss { printf(\"miss %d %d %d %d\\n\", arg0, arg1, arg2, arg3); }
usdt:$so:nbdkit:cache_hit { printf(\"hit %d %d %d %d\\n\", arg0, arg1, arg2, arg3); }
"
t nbdsh -u "$uri" -c "uri = '$uri'" -c '
h.pread(4096, 3 * 65536)
h.pread(4096, 3 * 65536)
b = nbd.NBD()
b.connect_uri(uri)
b.pread(4096, 9 * 65536)
b.shutdown()
h.shutdown()
'
trace_stop
cat "$out"

# The reads' starts, per connection: (id, cookie) in cookie order.
mapfile -t ids < <(awk '$1 == "start" { print $2 }' "$out" | sort -nu)
[ "${#ids[@]}" -eq 2 ] || fail "expected reads on 2 connections: ${ids[*]}"
starts ()
{
  awk -v id="$1" '$1 == "start" && $2 == id { print $3 }' "$out" | sort -n
}
mapfile -t a < <(starts "${ids[0]}")
mapfile -t b < <(starts "${ids[1]}")
# Which connection is A: the one that read twice.
if [ "${#b[@]}" -eq 2 ]; then
  ida="${ids[1]}"; idb="${ids[0]}"; tmp=("${a[@]}"); a=("${b[@]}"); b=("${tmp[@]}")
else
  ida="${ids[0]}"; idb="${ids[1]}"
fi
[ "${#a[@]}" -eq 2 ] && [ "${#b[@]}" -eq 1 ] ||
  fail "expected 2 reads on one connection and 1 on the other"
[ "$ida" -ne 0 ] && [ "$idb" -ne 0 ] || fail "a connection id of 0"

expect ()
{
  grep -qx "$1" "$out" || fail "no line '$1': the event is not joined to its read"
}
expect "miss $ida ${a[0]} $((3 * 65536)) 4096"
expect "hit $ida ${a[1]} $((3 * 65536)) 4096"
expect "miss $idb ${b[0]} $((9 * 65536)) 4096"
[ "$(grep -c '^miss' "$out")" -eq 2 ] || fail "expected exactly 2 misses"
[ "$(grep -c '^hit' "$out")" -eq 1 ] || fail "expected exactly 1 hit"
stop_server

# The asynchronous path: the miss fires as the read is passed on.
"$NBDKIT" file --dump-plugin | grep -q '^file_io_uring=yes' || {
  echo "$0: the file plugin has no io_uring: asynchronous path not tested"
  exit 0
}
truncate -s 1M "$tmpdir/disk"
start_server --filter=cache file "$tmpdir/disk" aio=io_uring
trace_start "$out" "$(cat "$out.bt")"
t nbdsh -u "$uri" -c 'h.pread(4096, 5 * 65536)'
trace_stop
cat "$out"
start="$(awk '$1 == "start" { print $2, $3 }' "$out")"
[ "$(wc -l <<< "$start")" -eq 1 ] && [ -n "$start" ] ||
  fail "expected one read: $start"
expect "miss $start $((5 * 65536)) 4096"
