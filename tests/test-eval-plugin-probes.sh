#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The eval plugin's probe: eval_script fires after each run of a method
# with the method, its exit code, the time it took and the errno: a read
# that succeeds (0, errno 0), one that fails with "ENOSPC ..." (1, errno
# 28), a method run through missing= (exit 2); a method neither given
# nor covered by missing= runs nothing and fires nothing.  Its id and
# cookie are those of the read's request_start (r1, r2 in trace_join),
# or the connection's id and cookie 0 outside any request (conn).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$abs_top_builddir/plugins/eval/.libs/nbdkit-eval-plugin.so"
[ -f "$so" ] || fail "$so not built"

start_server eval get_size='echo 1M' is_rotational='exit 3' \
  pread='if [ "$4" = 512 ]; then echo "ENOSPC full" >&2; exit 1; fi
         sleep 0.2; head -c $3 /dev/zero'
trace_start "$tmpdir/trace" "$(request_start_clause)
usdt:$so:nbdkit:eval_script {
  printf(\"%llu eval_script %d %d %s %d %d %d\\n\", nsecs, arg0, arg1,
         str(arg2), arg3, arg4 >= 200000000, arg5); }"
t nbdsh -u "$uri" -c '
h.pread(512, 0)
try:
    h.pread(512, 512)
except nbd.Error:
    pass'
trace_stop
trace_in_order "$tmpdir/trace" > "$tmpdir/ordered"
trace_join "$tmpdir/ordered" | tee "$tmpdir/got"
for want in "r1 pread 0 1 0" "r2 pread 1 0 28" "conn get_size 0 0 0" \
            "conn is_rotational 3 0 0"; do
  grep -qx "eval_script $want" "$tmpdir/got" ||
    fail "no eval_script '$want' (method, exit code, took >= 0.2 s, errno)"
done
! grep -q '^eval_script [a-z0-9]* open ' "$tmpdir/got" ||
  fail "open ran without open= or missing="
stop_server

# With missing=, the methods not given run it.
start_server eval get_size='echo 1M' pread='head -c $3 /dev/zero' \
  missing='exit 2'
trace_start "$tmpdir/trace2" "usdt:$so:nbdkit:eval_script {
  printf(\"%s %d %d\\n\", str(arg2), arg3, arg5); }"
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
trace_stop
cat "$tmpdir/trace2"
grep -qx "open 2 0" "$tmpdir/trace2" || fail "no eval_script 'open 2 0'"
