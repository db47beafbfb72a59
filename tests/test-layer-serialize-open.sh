#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# SERIALIZE_ALL_REQUESTS covers a connection's open and close, not only
# its requests (nbdkit-plugin(3): "only one open/read/write/close (etc)
# request will be in progress at any time").  tests/layer-plugin.c
# sleeps in open, close and pread and counts the times two of them
# ran at once; six clients connect together, and the plugin must count
# no overlap.  With model=parallel the same run shows overlaps, which
# proves the plugin can see them.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

plugin="$abs_builddir/.libs/layer-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"

clients='
for i in 1 2 3 4 5 6; do nbdinfo --size "$uri" > /dev/null & done
wait'

t "$NBDKIT" -U - "$plugin" model=serialize_all_requests sleep_ms=100 \
  --run "$clients" 2> "$tmpdir/serial.err"
grep -q '^layer-plugin: .* overlaps=0$' "$tmpdir/serial.err" || {
  cat "$tmpdir/serial.err"
  fail "open, close or a request overlapped under serialize_all_requests"
}

t "$NBDKIT" -U - "$plugin" model=parallel sleep_ms=100 \
  --run "$clients" 2> "$tmpdir/parallel.err"
if grep -q '^layer-plugin: .* overlaps=0$' "$tmpdir/parallel.err"; then
  cat "$tmpdir/parallel.err"
  fail "the plugin saw no overlap even in the parallel model"
fi
