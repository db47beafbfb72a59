#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The filter ABI rule: a filter is loaded if it was built for filter
# API 6 and an nbdkit 1.32.x release (Debian's prebuilt filters) or a
# release of the series this server reports, 1.46.x (its own filters),
# any micro version; any other claim is refused with one line naming
# both versions.  tests/abi-filter.c claims what
# ABI_FILTER_VERSION and ABI_FILTER_API say.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo
filter="$abs_builddir/.libs/abi-filter.so"
[ -f "$filter" ] || fail "$filter not built (make check builds it)"

accepted ()
{
  ABI_FILTER_VERSION=$1 ABI_FILTER_API=$2 \
    t "$NBDKIT" -U - --filter="$filter" memory 1M \
    --run 'nbdinfo --size "$uri"' > "$tmpdir/out" 2> "$tmpdir/err"
}

for v in 1.32.0 1.32.5 1.32.17 1.46.0 1.46.2 1.46.10; do
  accepted "$v" 6 || { cat "$tmpdir/err"; fail "a $v filter was refused"; }
  [ "$(cat "$tmpdir/out")" = 1048576 ] || fail "$v: wrong size"
done

for claim in "1.30.0 6" "1.33.1 6" "2.32.0 6" "1.32 6" "1.32.x 6" \
             "1.320.1 6" "1.32.5 5" "1.44.3 6" "1.47.0 6" "1.46 6" \
             "1.46.2 5"; do
  set -- $claim
  if accepted "$1" "$2"; then
    fail "a filter claiming $1 (API $2) was loaded"
  fi
  [ "$(wc -l < "$tmpdir/err")" -eq 1 ] || {
    cat "$tmpdir/err"
    fail "$1: the refusal is not one line"
  }
  grep -q "built for nbdkit $1 (filter API $2).*nbdkit 1\.32\.x and 1\.46\.x" \
    "$tmpdir/err" || {
    cat "$tmpdir/err"
    fail "$1: the refusal does not name both versions"
  }
done
cat "$tmpdir/err"

# Debian's prebuilt filters (nbdkit 1.32.5) all load.
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
if [ -d "$fdir" ]; then
  for so in "$fdir"/nbdkit-*-filter.so; do
    "$NBDKIT" --filter="$so" memory 1M --dump-plugin > /dev/null 2> "$tmpdir/err" || {
      cat "$tmpdir/err"
      fail "Debian's $(basename "$so") did not load"
    }
  done
fi
