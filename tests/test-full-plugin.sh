#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The full plugin: reads zeroes, every write, trim and zero (fast or
# not) fails with ENOSPC, and the map is one hole; the same size,
# flags, map, bytes and write results as Debian's nbdkit 1.32 full
# plugin; a size is required.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires test -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-full-plugin.so

t "$NBDKIT" -U - full 1M --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 1048576
assert not h.is_read_only()
assert h.pread(65536, 4096) == bytes(65536)
# A fast zero is refused as slow (ENOTSUP), as Debian's nbdkit does.
for name, fn, err in (("pwrite", lambda: h.pwrite(b"x" * 512, 0), "ENOSPC"),
                      ("trim", lambda: h.trim(4096, 0), "ENOSPC"),
                      ("zero", lambda: h.zero(4096, 0), "ENOSPC"),
                      ("fast zero",
                       lambda: h.zero(4096, 0, nbd.CMD_FLAG_FAST_ZERO),
                       "ENOTSUP")):
    try:
        fn()
        assert False, name + " succeeded"
    except nbd.Error as e:
        assert err in str(e), (name, str(e))
PY

# nbdcopy onto it fails and says why.
# (From a file: a server nbdcopy started itself would outlive the
# failed copy, holding the test's descriptors.)
head -c 1048576 /dev/urandom > "$tmpdir/src"
status=0
t "$NBDKIT" -U - full 1M --run "nbdcopy $tmpdir/src \"\$uri\"" \
  2> "$tmpdir/err" || status=$?
[ $status -ne 0 ] && grep -q "No space left on device" "$tmpdir/err" ||
  fail "nbdcopy onto a full disk: status $status: $(cat "$tmpdir/err")"

for size in 0 1 1M 64M; do
  compare "full-$size" read full "$size"
done
# The largest size (too big to copy or map whole): size, a read and
# one block status request at the very end.
t "$NBDKIT" -U - full 9223372036854775807 \
  --run 'nbdsh --base-allocation -u "$uri" -c -' <<'PY' ||
size = h.get_size()
assert size == 2**63 - 1
assert h.pread(4096, size - 4096) == bytes(4096)
seen = []
def f(meta, off, entries, err):
    seen.extend(entries)
h.block_status(65536, size - 65536, f)
assert seen[0] == 65536 and seen[1] == 3, seen
PY
  note_failure full-largest "size, read or map at the end of 2^63 - 1 bytes"
compare full-write write full 1M

status=0
"$NBDKIT" -U - full --run true 2> "$tmpdir/err" || status=$?
[ $status -eq 1 ] && [ "$(wc -l < "$tmpdir/err")" -eq 1 ] &&
  grep -q "^nbdkit: full: error: .*size" "$tmpdir/err" ||
  fail "full without a size: status $status: $(cat "$tmpdir/err")"
status=0
"$NBDKIT" -U - full size=big --run true 2> "$tmpdir/err" || status=$?
[ $status -eq 1 ] && grep -q "^nbdkit: full: error: size: " "$tmpdir/err" ||
  fail "full size=big: status $status: $(cat "$tmpdir/err")"
finish
