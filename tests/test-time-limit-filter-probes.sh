#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The time-limit filter's time_limit_expired probe fires once, for the
# connection's first request past the limit, with the connection's id
# (the one the server's connection_close gives) and that request's
# cookie (those of the second request_start, r2 in trace_join), the
# time since the open (at least the limit) and the limit.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so time-limit)"
start_server --filter=time-limit memory 1M time-limit=300ms
out="$tmpdir/trace"
trace_start "$out" "$(request_start_clause)
usdt:$so:nbdkit:time_limit_expired {
  printf(\"%llu expired %d %d %d %d\\n\", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$server_binary:nbdkit:connection_close {
  printf(\"%llu close %d\\n\", nsecs, arg0); }"
t nbdsh -u "$uri" -c - <<'PY'
import time
h.pread(1, 0)
time.sleep(0.4)
for i in range(3):
    try:
        h.pread(1, 0)
    except nbd.Error:
        pass
    else:
        raise AssertionError("not refused")
PY
t nbdsh -u "$uri" -c 'h.pread(1, 0)'
sleep 0.5
trace_stop
trace_in_order "$out" | tee "$tmpdir/ordered"
[ "$(grep -c '^expired' "$tmpdir/ordered")" -eq 1 ] || fail "not fired once"
read -r _ conn _ elapsed limit < <(grep '^expired' "$tmpdir/ordered")
[ "$limit" -eq 300000000 ] || fail "limit $limit"
[ "$elapsed" -ge 300000000 ] && [ "$elapsed" -lt 5000000000 ] ||
  fail "elapsed $elapsed"
grep -qx "close $conn" "$tmpdir/ordered" ||
  fail "connection $conn is not one that closed"
trace_join "$tmpdir/ordered" | grep -q "^expired r2 $elapsed $limit\$" ||
  fail "time_limit_expired is not charged to the second request"
