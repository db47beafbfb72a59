#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nozero filter's probes: with zeromode=emulate a zero request
# fires nozero_emulated (offset, count) and a fast zero fires
# nozero_fast_refused (offset, count); a write fires neither.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so nozero)"
start_server --filter=nozero memory 1M zeromode=emulate
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:nozero_emulated /arg0 != 0 && arg1 != 0/ { printf(\"emulated %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:nozero_fast_refused /arg0 != 0 && arg1 != 0/ { printf(\"refused %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 4096, 0)
h.zero(12288, 4096)
try:
    h.zero(512, 65536, nbd.CMD_FLAG_FAST_ZERO)
except nbd.Error:
    pass
else:
    raise AssertionError("fast zero succeeded")
'
trace_stop
cat "$tmpdir/trace"
grep -qx 'emulated 4096 12288' "$tmpdir/trace" || fail "no nozero_emulated 4096 12288"
grep -qx 'refused 65536 512' "$tmpdir/trace" || fail "no nozero_fast_refused 65536 512"
[ "$(grep -cE '^(emulated|refused)' "$tmpdir/trace")" -eq 2 ] ||
  fail "probes fired more than once each"
