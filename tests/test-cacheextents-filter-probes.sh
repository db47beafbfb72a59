#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# cacheextents_miss and cacheextents_hit fire with the request's offset
# and count: the first block status request (for the whole disk, so
# the file plugin answers for all of it) misses, the next ones inside
# the answer hit, a write drops the cache so the next misses.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
so="$(filter_so cacheextents)"
start_server --filter=cacheextents file "$disk"
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:cacheextents_hit /arg0 != 0 && arg1 != 0/ { printf(\"hit %d %d\n\", arg2, arg3); }
usdt:$so:nbdkit:cacheextents_miss /arg0 != 0 && arg1 != 0/ { printf(\"miss %d %d\n\", arg2, arg3); }"
t nbdsh --base-allocation -u "$uri" -c '
def bs(count, offset):
    h.block_status(count, offset, lambda *a: 0, nbd.CMD_FLAG_REQ_ONE)
bs(1048576, 0)
bs(8192, 65536)
bs(512, 300000)
h.pwrite(b"x" * 512, 0)
bs(1000, 1000)
'
trace_stop
cat "$tmpdir/trace"
grep -E '^(hit|miss)' "$tmpdir/trace" > "$tmpdir/got"
cat > "$tmpdir/want" <<'EOF'
miss 0 1048576
hit 65536 8192
hit 300000 512
miss 1000 1000
EOF
diff -u "$tmpdir/want" "$tmpdir/got" || fail "cacheextents probes: unexpected events"
