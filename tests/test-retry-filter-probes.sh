#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The retry filter's probes: retry_attempt (id, cookie, command,
# attempt, delay in ns) before each wait, retry_reopen (id, cookie,
# command, reopens so far, readonly, result) after each reopen; that
# id and cookie are the request's is test-retry-probes-request.sh's.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

so="$(filter_so retry)"
start_server --filter=retry "$flaky" fail=2 retry-delay=1 retry-readonly=yes
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:retry_attempt {
  printf(\"attempt %d %d %s %d %d\\n\", arg0 > 0, arg1 > 0, str(arg2), arg3,
         arg4);
}
usdt:$so:nbdkit:retry_reopen {
  printf(\"reopen %d %d %s %d %d %d\\n\", arg0 > 0, arg1 > 0, str(arg2), arg3,
         arg4, arg5);
}"
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
sleep 0.5
trace_stop
cat "$out"
printf '%s\n' "attempt 1 1 pread 1 1000000000" "reopen 1 1 pread 1 1 0" \
  "attempt 1 1 pread 2 2000000000" "reopen 1 1 pread 2 1 0" \
  > "$tmpdir/expected"
grep -E '^(attempt|reopen) ' "$out" | diff -u "$tmpdir/expected" - ||
  fail "unexpected probe output"
