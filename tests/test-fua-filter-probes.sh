#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The fua filter's probes: under fuamode=force a write without FUA
# fires fua_forced (offset, count) and a flush fires fua_flush_ignored;
# under fuamode=discard a write with FUA fires fua_discarded; with
# flush-on-close=true each hang-up of a client of a writable export
# fires fua_flush_on_close (status 0) once.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so fua)"
prog="
usdt:$so:nbdkit:fua_forced /arg0 != 0 && arg1 != 0/ { printf(\"forced %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:fua_discarded /arg0 != 0 && arg1 != 0/ { printf(\"discarded %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:fua_flush_ignored /arg0 != 0 && arg1 != 0/ { printf(\"flush ignored\\n\"); }
usdt:$so:nbdkit:fua_flush_on_close { printf(\"flush on close %d\\n\", arg0); }"

start_server --filter=fua memory 1M fuamode=force
trace_start "$tmpdir/force" "$prog"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 1000, 4096)
h.pwrite(b"x" * 512, 0, nbd.CMD_FLAG_FUA)
h.flush()
'
trace_stop
stop_server
cat "$tmpdir/force"
grep -qx 'forced 4096 1000' "$tmpdir/force" || fail "no fua_forced 4096 1000"
grep -q '^forced 0 ' "$tmpdir/force" && fail "fua_forced for a write with FUA"
grep -qx 'flush ignored' "$tmpdir/force" || fail "no fua_flush_ignored"

start_server --filter=fua memory 1M fuamode=discard
trace_start "$tmpdir/discard" "$prog"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 512, 0)
h.zero(8192, 65536, nbd.CMD_FLAG_FUA)
'
trace_stop
cat "$tmpdir/discard"
grep -qx 'discarded 65536 8192' "$tmpdir/discard" ||
  fail "no fua_discarded 65536 8192"
[ "$(grep -c '^discarded' "$tmpdir/discard")" -eq 1 ] ||
  fail "fua_discarded for a write without FUA"
stop_server

start_server --filter=fua memory 1M flush-on-close=true
trace_start "$tmpdir/close" "$prog"
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0)'
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
sleep 0.2                       # the last close runs after the client left
trace_stop
cat "$tmpdir/close"
[ "$(grep -c '^flush on close 0$' "$tmpdir/close")" -eq 2 ] ||
  fail "not one fua_flush_on_close per connection"
