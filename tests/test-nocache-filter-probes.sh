#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# With cachemode=nop every cache request fires nocache_dropped (offset,
# count), and nothing else does.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so nocache)"
start_server --filter=nocache memory 1M cachemode=nop
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:nocache_dropped /arg0 != 0 && arg1 != 0/ { printf(\"dropped %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
h.pread(4096, 0)
h.cache(8192, 4096)
h.cache(100, 1000)
'
trace_stop
cat "$tmpdir/trace"
grep -qx 'dropped 4096 8192' "$tmpdir/trace" || fail "no nocache_dropped 4096 8192"
grep -qx 'dropped 1000 100' "$tmpdir/trace" || fail "no nocache_dropped 1000 100"
[ "$(grep -c '^dropped' "$tmpdir/trace")" -eq 2 ] || fail "wrong number of probes"
