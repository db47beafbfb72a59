#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The count filter's count_totals probe fires once as the server exits,
# with the bytes read, written, zeroed and trimmed.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so count)"
start_server --filter=count memory 1M
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:count_totals {
  printf(\"totals %d %d %d %d\\n\", arg0, arg1, arg2, arg3);
}"
t nbdsh -u "$uri" -c - <<'PY'
h.pwrite(b"x" * 1000, 0)
h.pread(3000, 0)
h.zero(20000, 4096)
h.trim(400000, 65536)
h.pread(7, 0)
PY
stop_server
trace_stop
cat "$out"
[ "$(grep -c '^totals' "$out")" -eq 1 ] || fail "count_totals not fired once"
grep -qx 'totals 3007 1000 20000 400000' "$out" || fail "wrong totals"
