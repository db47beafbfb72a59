#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The eval plugin's probe: eval_script fires after each run of a method
# with the method, its exit code, the time it took and the errno: a read
# that succeeds (0, errno 0), one that fails with "ENOSPC ..." (1, errno
# 28), a method run through missing= (exit 2); a method neither given
# nor covered by missing= runs nothing and fires nothing.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$abs_top_builddir/plugins/eval/.libs/nbdkit-eval-plugin.so"
[ -f "$so" ] || fail "$so not built"

start_server eval get_size='echo 1M' is_rotational='exit 3' \
  pread='if [ "$4" = 512 ]; then echo "ENOSPC full" >&2; exit 1; fi
         sleep 0.2; head -c $3 /dev/zero'
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:eval_script {
  printf(\"%s %d %d %d\\n\", str(arg0), arg1, arg2 >= 200000000, arg3); }"
t nbdsh -u "$uri" -c '
h.pread(512, 0)
try:
    h.pread(512, 512)
except nbd.Error:
    pass'
trace_stop
cat "$tmpdir/trace"
for want in "pread 0 1 0" "pread 1 0 28" "get_size 0 0 0" \
            "is_rotational 3 0 0"; do
  grep -qx "$want" "$tmpdir/trace" ||
    fail "no eval_script '$want' (method, exit code, took >= 0.2 s, errno)"
done
! grep -q '^open ' "$tmpdir/trace" || fail "open ran without open= or missing="
stop_server

# With missing=, the methods not given run it.
start_server eval get_size='echo 1M' pread='head -c $3 /dev/zero' \
  missing='exit 2'
trace_start "$tmpdir/trace2" "usdt:$so:nbdkit:eval_script {
  printf(\"%s %d %d\\n\", str(arg0), arg1, arg3); }"
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
trace_stop
cat "$tmpdir/trace2"
grep -qx "open 2 0" "$tmpdir/trace2" || fail "no eval_script 'open 2 0'"
