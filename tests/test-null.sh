#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The null plugin: an export of the given size that reads as zeroes and
# throws writes away; with no size it is empty.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

t "$NBDKIT" -U - null 1M --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 1048576
assert h.pread(65536, 0) == bytes(65536)
h.pwrite(b"\xff" * 4096, 0)
assert h.pread(4096, 0) == bytes(4096), "null plugin kept written data"
h.flush()
PY

t "$NBDKIT" -U - null --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 0 ] || fail "'nbdkit null' size is $(cat "$tmpdir/size")"
