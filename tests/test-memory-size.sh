#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The README's command: `nbdkit memory 1G' serves an export of exactly
# 1073741824 bytes, as nbdinfo sees it.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

t "$NBDKIT" -U - memory 1G --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
cat "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 1073741824 ] || fail "size is not 1073741824"

# The same through the README's exact spelling (plain nbdinfo output).
t "$NBDKIT" -U - memory 1G --run 'nbdinfo "$uri"' > "$tmpdir/info"
cat "$tmpdir/info"
grep -Eq '^[[:space:]]*export-size: 1073741824 \(1G\)' "$tmpdir/info" ||
  fail "nbdinfo output has no 'export-size: 1073741824 (1G)' line"
