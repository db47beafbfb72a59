#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The evil filter's evil_corrupt probe fires once for each bit it
# changed, with the mode, the byte's offset on the disk, the bit and
# its new value: exactly the bits by which the bytes the client got
# differ from the plugin's.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so evil)"
start_server --filter=evil memory 1M evil-probability=1e-4 evil-seed=5
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:evil_corrupt /arg0 != 0 && arg1 != 0/ {
  printf(\"corrupt %s %d %d %d\\n\", str(arg2), arg3, arg4, arg5);
}"
# The memory plugin's disk reads as zeroes: every changed bit is a 1.
off=4099
t nbdsh -u "$uri" -c - <<PY > "$tmpdir/want"
off = $off
got = h.pread(65536, off)
for i, byte in enumerate(got):
    for bit in range(8):
        if byte >> bit & 1:
            print("corrupt stuck-bits %d %d 1" % (off + i, bit))
PY
sleep 0.5
trace_stop
grep '^corrupt' "$out" | sort > "$tmpdir/got"
sort -o "$tmpdir/want" "$tmpdir/want"
cat "$tmpdir/got"
# 1e-4 of 512 Kbit stuck, half of them at 1.
n=$(wc -l < "$tmpdir/want")
[ "$n" -gt 10 ] && [ "$n" -lt 60 ] || fail "$n bits changed"
diff -u "$tmpdir/want" "$tmpdir/got" || fail "probes differ from the bytes"
