#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# reply_written and in_flight on the two paths where a read's data
# does not go through the worker's buffer: mapped from the memory
# plugin's pages (send_mapped) and sent from the file plugin's file
# with sendfile (send_fd), for reads of 1 MiB.  One synchronous client
# each: every request must be dispatched with in_flight = 1 (a path
# that forgot to count its reply as written would make it grow), and
# each 1 MiB read's reply_written must carry 1 MiB and its header
# (as reply_send says) and ok = 1.  Would catch: reply_written missing
# on either path, or those paths not counting their replies.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

b="$server_binary"
program="
usdt:$b:nbdkit:request_dispatch { printf(\"%llu dispatch %d %d %d\n\", nsecs, arg0, arg1, arg3); }
usdt:$b:nbdkit:reply_send { printf(\"%llu send %d %d %d\n\", nsecs, arg0, arg1, arg3); }
usdt:$b:nbdkit:reply_written { printf(\"%llu written %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg4); }"

check ()
{
  local what="$1" out="$2"
  trace_in_order "$out" > "$out.got"
  cat "$out.got"
  awk '
    $1 == "dispatch" { d++; if ($4 != 1) { print "in_flight " $4; bad = 1 } }
    $1 == "send" { sb[$3] = $4 }
    $1 == "written" {
      if ($4 != sb[$3] || $5 != 1) { print "written: " $0; bad = 1 }
      if ($4 > 1048576) big++
    }
    END { exit !(!bad && d == 4 && big == 3) }' "$out.got" ||
    fail "$what: wrong in_flight or reply_written"
}

client='
for i in range(3):
    h.pread(1048576, i * 1048576)
h.pread(4096, 0)
h.shutdown()'

# Mapped reads from the memory plugin.
start_server memory 4M
trace_start "$tmpdir/mem" "$program"
t nbdsh -u "$uri" -c "$client"
sleep 1
trace_stop
stop_server
check "memory (mapped)" "$tmpdir/mem"

# Reads sent from the file with sendfile.
truncate -s 4M "$tmpdir/disk"
start_server file "$tmpdir/disk"
trace_start "$tmpdir/file" "$program"
t nbdsh -u "$uri" -c "$client"
sleep 1
trace_stop
check "file (sendfile)" "$tmpdir/file"
