#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The time-limit filter's time_limit_expired probe fires once, for the
# connection's first request past the limit, with the connection's id
# (the one the server's connection_close gives), the time since the
# open (at least the limit) and the limit.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so time-limit)"
start_server --filter=time-limit memory 1M time-limit=300ms
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:time_limit_expired {
  printf(\"expired %d %d %d\\n\", arg0, arg1, arg2);
}
usdt:$server_binary:nbdkit:connection_close { printf(\"close %d\\n\", arg0); }"
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
cat "$out"
[ "$(grep -c '^expired' "$out")" -eq 1 ] || fail "not fired once"
read -r _ conn elapsed limit < <(grep '^expired' "$out")
[ "$limit" -eq 300000000 ] || fail "limit $limit"
[ "$elapsed" -ge 300000000 ] && [ "$elapsed" -lt 5000000000 ] ||
  fail "elapsed $elapsed"
grep -qx "close $conn" "$out" || fail "connection $conn is not one that closed"
