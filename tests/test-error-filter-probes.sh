#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The error filter's error_injected probe fires once per failed request,
# with the command's name, the errno, the offset and the count; requests
# that are let through fire nothing.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$(filter_so error)"
start_server --filter=error memory 1M error=ENOSPC error-pwrite-rate=1 \
  error-trim-rate=1 error-trim=EPERM
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:error_injected /arg0 != 0 && arg1 != 0/ {
  printf(\"injected %s %d %d %d\\n\", str(arg2), arg3, arg4, arg5);
}"
t nbdsh -u "$uri" -c - <<'PY'
for off, n in ((8192, 4096), (12345, 100)):
    try:
        h.pwrite(b"x" * n, off)
    except nbd.Error as e:
        assert e.errno == "ENOSPC", e.errno
    else:
        raise AssertionError("pwrite did not fail")
try:
    h.trim(65536, 0)
except nbd.Error as e:
    assert e.errno == "EPERM", e.errno
h.pread(4096, 0)
h.zero(4096, 0)
PY
sleep 0.5
trace_stop
cat "$out"
[ "$(grep -c '^injected' "$out")" -eq 3 ] || fail "expected 3 error_injected"
grep -qx "injected pwrite 28 8192 4096" "$out" || fail "no pwrite 8192 4096"
grep -qx "injected pwrite 28 12345 100" "$out" || fail "no pwrite 12345 100"
grep -qx "injected trim 1 0 65536" "$out" || fail "no trim 0 65536"
