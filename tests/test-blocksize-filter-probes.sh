#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The blocksize filter's probes fire with the right arguments: with
# minblock=4k maxdata=8k, a write of 20000 bytes at 1000 is cut into
# 4 pieces (a read-modify-write of 1000+3096, two 8K writes, a
# read-modify-write of 20480+520), so blocksize_split fires once with
# (1000, 20000, 4) and blocksize_rmw twice; a 1-byte read inside one
# block is not split, and an aligned 4K write neither splits nor RMWs.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so blocksize)"
start_server --filter=blocksize memory 1M minblock=4k maxdata=8k
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:blocksize_split /arg0 != 0 && arg1 != 0/ { printf(\"split %d %d %d\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:blocksize_rmw /arg0 != 0 && arg1 != 0/ { printf(\"rmw %d %d\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
h.pread(1, 5)
h.pwrite(b"a" * 4096, 8192)
h.pwrite(b"b" * 20000, 1000)
assert h.pread(20000, 1000) == b"b" * 20000
'
trace_stop
cat "$tmpdir/trace"
# The read back of 20000 bytes at 1000 is split too (head, 2 x 8K, tail).
grep -E '^(split|rmw)' "$tmpdir/trace" > "$tmpdir/got"
cat > "$tmpdir/want" <<'EOF'
rmw 1000 3096
rmw 20480 520
split 1000 20000 4
split 1000 20000 4
EOF
diff -u "$tmpdir/want" "$tmpdir/got" || fail "blocksize probes: unexpected events"
