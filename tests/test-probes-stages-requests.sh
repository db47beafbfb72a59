#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The per-request stages under bpftrace: request_dispatch's in_flight,
# reply_written after reply_send, and the sock_read_* and sock_write_*
# pairs.  nbdsh queues 8 reads of 4096 bytes at once against a server
# whose reads take 50 ms (the delay filter), so while the first runs
# the others wait in the input buffer and their replies are held back
# together: in_flight must exceed 1.  Each read's reply_written must
# come after its reply_send, carry the same byte count (4096 and a
# header), say the write succeeded, and the socket probes must pair up
# (as many done as start) and account for every byte connection_close
# reports written.  Would catch: in_flight not counting held replies,
# reply_written missing or before the write, a write path without the
# sock_write probes (bytes_out would exceed their sum).
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

start_server --filter=delay memory 1M delay-read=50ms
b="$server_binary"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:request_dispatch { printf(\"%llu dispatch %d %d %d\n\", nsecs, arg0, arg1, arg3); }
usdt:$b:nbdkit:reply_send { printf(\"%llu send %d %d %d\n\", nsecs, arg0, arg1, arg3); }
usdt:$b:nbdkit:reply_written { printf(\"%llu written %d %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3, arg4); }
usdt:$b:nbdkit:sock_read_start { printf(\"%llu rstart %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:sock_read_done { printf(\"%llu rdone %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3); }
usdt:$b:nbdkit:sock_write_start { printf(\"%llu wstart %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:sock_write_done { printf(\"%llu wdone %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3); }
usdt:$b:nbdkit:connection_close { printf(\"%llu close %d %d %d %d\n\", nsecs, arg0, arg2, arg3, arg4); }"

t nbdsh -u "$uri" -c '
bufs = [nbd.Buffer(4096) for i in range(8)]
cookies = [h.aio_pread(bufs[i], i * 4096) for i in range(8)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
h.shutdown()'
trace_stop_at_close

id="$(awk '$1 == "close" { print $2; exit }' "$tmpdir/got")"
[ -n "$id" ] || fail "no connection_close"

# in_flight: at least one read dispatched with another unanswered.
awk -v id="$id" '$1 == "dispatch" && $2 == id && $4 > 1 { f = 1 }
  $1 == "dispatch" && $4 < 1 { bad = 1 }
  END { exit !(f && !bad) }' "$tmpdir/got" ||
  fail "request_dispatch never saw in_flight > 1 (or saw 0)"

# reply_written: one per reply_send, after it, same bytes, ok = 1.
awk -v id="$id" '
  $2 != id { next }
  $1 == "send" { s[$3] = NR; sb[$3] = $4; n++ }
  $1 == "written" {
    w++
    if (!($3 in s) || s[$3] > NR) { print "written before send: " $3; bad = 1 }
    if ($4 != sb[$3]) { print "bytes differ: " $3; bad = 1 }
    if ($4 < 4096 + 16 || $4 > 4096 + 40) { print "bytes: " $4; bad = 1 }
    if ($6 != 1) { print "not ok: " $3; bad = 1 }
  }
  END { if (n != 8 || w != 8) { print "sends " n " written " w; bad = 1 }
        exit bad }' "$tmpdir/got" ||
  fail "reply_written does not match reply_send"

# Socket probes: paired, and the writes add up to bytes_out.
awk -v id="$id" '
  $2 != id { next }
  $1 == "rstart" { rs++ }
  $1 == "rdone" { rd++; if ($3 > 0) rin += $3 }
  $1 == "wstart" { ws++ }
  $1 == "wdone" { wd++; if ($3 < 0 || $4 != 0) bad = 1; wout += $3 }
  $1 == "close" { bin = $4; bout = $5 }
  END {
    printf "reads %d/%d (%d bytes, %d in), writes %d/%d (%d bytes, %d out)\n",
      rs, rd, rin, bin, ws, wd, wout, bout
    exit !(!bad && rs > 0 && rs == rd && ws > 0 && ws == wd &&
           wout == bout && rin >= bin)
  }' "$tmpdir/got" ||
  fail "sock_read/sock_write probes do not pair or add up"
