#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The readahead filter's probes, on a fresh server (the window starts
# at 32 KiB): three sequential 4 KiB reads from 0, then a jump to 1 MiB.
#   readahead_issued (offset, count): each prefetch sent below,
#     (4096, 32768) (8192, 32768) (12288, 32768) (1052672, 32768);
#   readahead_used (offset, count): the later reads that fall in them,
#     (4096, 4096) (8192, 4096);
#   readahead_wasted (offset, count): what the jump left unread,
#     (12288, 32768), and at disconnect what the last one left,
#     (1052672, 32768).
# The probes that fire for a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set
# (the wasted at disconnect, outside any request, has cookie 0).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

start_server --filter=readahead memory 16M
so="$(filter_so readahead)"
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:readahead_issued /arg0 > 0 && arg1 > 0/ {
  printf(\"issued %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:readahead_used /arg0 > 0 && arg1 > 0/ {
  printf(\"used %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:readahead_wasted /arg0 > 0/ {
  printf(\"wasted %d %d %d\\n\", arg1 > 0, arg2, arg3); }"
# Pauses let the background thread send each prefetch before the next
# read, and before the disconnect drops what is still queued.
t nbdsh -u "$uri" -c '
import time
for off in (0, 4096, 8192, 1048576):
    h.pread(4096, off)
    time.sleep(0.3)
'
# The disconnect's wasted probe fires after the client has gone.
sleep 1
trace_stop
cat "$tmpdir/trace"

check ()
{
  local kind="$1"
  shift
  grep "^$kind " "$tmpdir/trace" > "$tmpdir/got.$kind" || :
  printf "$kind %s\\n" "$@" > "$tmpdir/want.$kind"
  diff -u "$tmpdir/want.$kind" "$tmpdir/got.$kind" ||
    fail "readahead_$kind did not fire as expected"
}
check issued "4096 32768" "8192 32768" "12288 32768" "1052672 32768"
check used "4096 4096" "8192 4096"
# The second is wasted as the connection closes, outside a request.
check wasted "1 12288 32768" "0 1052672 32768"
