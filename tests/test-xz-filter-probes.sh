#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The xz filter's probes fire under bpftrace with the right arguments:
# xz_block_decompress (block number, uncompressed size) for each block a
# read decompresses, xz_cache_hit (block number, uncompressed size) for
# each block found in the cache, in the order a client's reads need
# them, with a two-block cache evicting the least recently used block.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh xz
tracing_lock

so="$(filter_so xz)"
data="$tmpdir/data.img"
/usr/bin/python3 -c '
import random, sys
sys.stdout.buffer.write(random.Random(5).randbytes((1 << 20) + 1000))
' > "$data"
xz -c --block-size=65536 "$data" > "$tmpdir/data.xz"

start_server --filter=xz file "$tmpdir/data.xz" xz-max-depth=2
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:xz_block_decompress /arg0 > 0 && arg1 > 0/ {
  printf(\"dec %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:xz_cache_hit /arg0 > 0 && arg1 > 0/ {
  printf(\"hit %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c - <<PY
data = open("$data", "rb").read()
for off, n in [(0, 512), (1000, 512), (65536 - 50, 100), (3 * 65536, 10),
               (0, 10), (1 << 20, 1000), (3 * 65536 + 5, 10)]:
    assert h.pread(n, off) == data[off:off + n], off
PY
trace_stop

cat > "$tmpdir/expected" <<EOF
dec 1 65536
hit 1 65536
hit 1 65536
dec 2 65536
dec 4 65536
dec 1 65536
dec 17 1000
dec 4 65536
EOF
grep -E '^(dec|hit) ' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  fail "xz probes: unexpected sequence" \
    "(trace errors: $(cat "$tmpdir/trace.err"))"
