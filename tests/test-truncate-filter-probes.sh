#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The truncate filter's probes fire with the right arguments: a read
# across the plugin's end fires truncate_read_tail with the first byte
# past the end and the number of zeroes filled in; a non-zero write
# there fires truncate_write_refused likewise.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so truncate)"
start_server --filter=truncate memory 10000 truncate=20000
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:truncate_read_tail /arg0 > 0 && arg1 > 0/ {
  printf(\"tail %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:truncate_write_refused /arg0 > 0 && arg1 > 0/ {
  printf(\"refused %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
h.pread(4000, 8000)
h.pread(100, 5000)
try:
    h.pwrite(b"x" * 300, 9900)
except nbd.Error:
    pass
else:
    raise AssertionError("write refused")
'
trace_stop
cat "$tmpdir/trace"
grep -qx 'tail 10000 2000' "$tmpdir/trace" || fail "no truncate_read_tail 10000 2000"
grep -qx 'refused 10000 200' "$tmpdir/trace" ||
  fail "no truncate_write_refused 10000 200"
[ "$(grep -c '^tail' "$tmpdir/trace")" -eq 1 ] ||
  fail "truncate_read_tail fired for a read inside the plugin"
