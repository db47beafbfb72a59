#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The delay filter's delay_sleep probe fires before each sleep with the
# command and the nanoseconds it sleeps; commands without a delay fire
# nothing.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
tracing_lock

so="$(filter_so delay)"
start_server --filter=delay memory 1M rdelay=50ms delay-zero=20ms \
  delay-open=10ms delay-close=1
out="$tmpdir/trace"
# Request delays carry the connection id and the request's cookie; the
# open and close delays the id alone (cookie 0: no request).
trace_start "$out" "usdt:$so:nbdkit:delay_sleep /arg0 != 0 && arg1 != 0/ {
  printf(\"sleep %s %d\\n\", str(arg2), arg3);
}
usdt:$so:nbdkit:delay_sleep /arg0 != 0 && arg1 == 0/ {
  printf(\"sleep %s %d outside\\n\", str(arg2), arg3);
}"
t nbdsh -u "$uri" -c - <<'PY'
h.pread(512, 0)
h.pread(512, 4096)
h.zero(512, 0)
h.pwrite(b"x", 0)
h.shutdown()
PY
sleep 1.5
trace_stop
cat "$out"
[ "$(grep -c '^sleep' "$out")" -eq 5 ] || fail "expected 5 delay_sleep"
[ "$(grep -cx 'sleep read 50000000' "$out")" -eq 2 ] || fail "reads"
grep -qx 'sleep zero 20000000' "$out" || fail "no zero 20 ms"
grep -qx 'sleep open 10000000 outside' "$out" || fail "no open 10 ms"
grep -qx 'sleep close 1000000000 outside' "$out" || fail "no close 1 s"
