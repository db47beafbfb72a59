#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The qcow2dec filter's probes: a read over four clusters of different
# kinds fires qcow2dec_lookup once per cluster with its kind (stored,
# unallocated, zero, compressed) and where its data is in the image (the
# offsets qemu-img map and the L2 table give), and qcow2dec_l2_cache
# misses the one L2 table once, then hits it.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_cmd qemu-img qemu-io nbdsh python3
requires_tracer

img="$tmpdir/p.qcow2"
qemu-img create -q -f qcow2 "$img" 1M
qemu-io -f qcow2 -c 'write -P 0x11 0 64k' -c 'write -z 128k 64k' \
  -c 'write -c -P 0x22 192k 64k' "$img" > /dev/null

# Where things are in the image: the L2 table, the stored cluster 0
# and the compressed cluster 3 (its offset from the L2 entry).
read -r l2 host0 host3 < <(python3 - "$img" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
cb = struct.unpack(">I", data[20:24])[0]
l1 = struct.unpack(">Q", data[40:48])[0]
l2 = struct.unpack(">Q", data[l1:l1 + 8])[0] & 0x00fffffffffffe00
e = [struct.unpack(">Q", data[l2 + 8 * i:l2 + 8 * i + 8])[0] for i in range(4)]
x = 62 - (cb - 8)
print(l2, e[0] & 0x00fffffffffffe00, e[3] & ((1 << x) - 1))
PY
)
# qemu-img agrees on the stored cluster.
qemu-img map --output=json "$img" | grep -q "\"start\": 0, .*\"offset\": $host0}" ||
  fail "qemu-img map does not put cluster 0 at $host0"

so="$(filter_so qcow2dec)"
start_server --filter=qcow2dec file "$img"
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:qcow2dec_lookup /arg0 > 0 && arg1 > 0/ {
  printf(\"lookup %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:qcow2dec_l2_cache /arg0 > 0 && arg1 > 0/ {
  printf(\"l2 %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
assert h.pread(4, 0) == b"\x11" * 4
buf = h.pread(256 * 1024, 0)
assert buf[65536:196608] == bytes(131072)
assert buf[196608:] == b"\x22" * 65536
'
trace_stop

grep -E '^(lookup|l2) ' "$tmpdir/trace" > "$tmpdir/got" || :
cat > "$tmpdir/expected" <<EOT
l2 $l2 0
lookup 0 2 $host0
l2 $l2 1
lookup 0 2 $host0
l2 $l2 1
lookup 65536 0 0
l2 $l2 1
lookup 131072 1 0
l2 $l2 1
lookup 196608 3 $host3
EOT
cat "$tmpdir/got"
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  { cat "$tmpdir/trace.err"; fail "probes: not the expected lookups"; }
