#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The retry-request filter's retry_request_attempt probe fires before
# each retry with the connection id and cookie (neither 0), the
# command, the attempt number and the wait in ns.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

so="$(filter_so retry-request)"
start_server --filter=retry-request "$flaky" fail=2 retry-request-delay=1 \
  retry-request-retries=3
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:retry_request_attempt {
  printf(\"attempt %d %d %s %d %d\\n\", arg0 > 0, arg1 > 0, str(arg2), arg3,
         arg4);
}"
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0); h.pread(512, 0)'
sleep 0.5
trace_stop
cat "$out"
printf '%s\n' "attempt 1 1 pwrite 1 1000000000" \
  "attempt 1 1 pwrite 2 1000000000" \
  > "$tmpdir/expected"
grep '^attempt ' "$out" | diff -u "$tmpdir/expected" - ||
  fail "unexpected probe output"
