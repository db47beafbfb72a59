#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# exitwhen_triggered fires under bpftrace once, with the reason, when
# a client's connecting finds the watched file created; the refused
# client and the server's exit do not fire it again.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdinfo
tracing_lock

so="$(filter_so exitwhen)"
start_server --filter=exitwhen memory 1M \
  exit-when-file-created="$tmpdir/stop" exit-when-poll=600
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:exitwhen_triggered { printf(\"triggered|%s\\n\", str(arg0)); }"
t nbdinfo --size "$uri" > /dev/null
touch "$tmpdir/stop"
expect_fail t nbdinfo --size "$uri" 2> /dev/null
wait_for 20 ! -e "/proc/$server_pid" || fail "the server did not exit"
trace_stop
cat "$tmpdir/trace"
[ "$(grep -c '^triggered' "$tmpdir/trace")" -eq 1 ] &&
  grep -qxF "triggered|file created: $tmpdir/stop" "$tmpdir/trace" ||
  fail "expected exitwhen_triggered (file created: $tmpdir/stop) once"
