#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit memory --dump-plugin describes OUR memory plugin (from the build
# tree, not Debian's) as key=value lines.
source "$(dirname "$0")/functions.sh"

t "$NBDKIT" memory --dump-plugin > "$tmpdir/dump"
cat "$tmpdir/dump"
grep -qx 'name=memory' "$tmpdir/dump" || fail "no name=memory"
grep -Eq '^path=.*nbdkit-memory-plugin\.so$' "$tmpdir/dump" || fail "no path="
if [ "$NBDKIT" = "$abs_top_builddir/nbdkit" ]; then
  grep -Fq "path=$abs_top_builddir/" "$tmpdir/dump" ||
    fail "plugin was not loaded from the build tree"
fi
grep -Eq '^api_version=[12]$' "$tmpdir/dump" || fail "no api_version="
grep -Eq '^thread_model=' "$tmpdir/dump" || fail "no thread_model="
