#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The pattern plugin: every 8-byte word is its own offset, big endian,
# read at any alignment; read-only; the same size, flags, map and bytes
# as Debian's nbdkit 1.32 pattern plugin; bad sizes refused.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires test -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-pattern-plugin.so

t "$NBDKIT" -U - pattern 1M --run 'nbdsh -u "$uri" -c -' <<'PY'
import struct
assert h.get_size() == 1048576
assert h.is_read_only()
b = h.pread(65536, 0)
for off in range(0, 65536, 8):
    assert b[off:off+8] == struct.pack(">Q", off), off
# Unaligned reads, across word boundaries, near the end.
for off, n in ((3, 1), (5, 11), (4093, 17), (1048576 - 13, 13)):
    want = b"".join(struct.pack(">Q", w)
                    for w in range(off & ~7, off + n + 8, 8))
    got = h.pread(n, off)
    assert got == want[off - (off & ~7):][:n], (off, n, got)
try:
    h.pwrite(b"x", 0)
    assert False, "write to a read-only disk"
except nbd.Error:
    pass
PY

# The largest size, read at its very end.
t "$NBDKIT" -U - pattern 9223372036854775807 --run 'nbdsh -u "$uri" -c -' <<'PY'
import struct
size = h.get_size()
assert size == 2**63 - 1
last = size & ~7
assert h.pread(size - last, last) == struct.pack(">Q", last)[:size - last]
PY

for size in 0 1 7 8 1001 1M 33554431; do
  compare "pattern-$size" read pattern "$size"
done
compare pattern-size-key read pattern size=65536
compare pattern-no-size read pattern

for bad in size=-1 size=1Q size=9223372036854775808; do
  status=0
  "$NBDKIT" -U - pattern "$bad" --run true 2> "$tmpdir/err" || status=$?
  [ $status -eq 1 ] && [ "$(wc -l < "$tmpdir/err")" -eq 1 ] &&
    grep -q '^nbdkit: pattern: error: size: ' "$tmpdir/err" ||
    fail "pattern $bad: status $status: $(cat "$tmpdir/err")"
done
status=0
"$NBDKIT" -U - pattern 1M foo=bar --run true 2> "$tmpdir/err" || status=$?
[ $status -eq 1 ] && grep -q "unknown parameter 'foo'" "$tmpdir/err" ||
  fail "pattern foo=bar: status $status: $(cat "$tmpdir/err")"
finish
