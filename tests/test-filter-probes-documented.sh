#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every probe a built filter carries (its USDT notes, provider nbdkit)
# is in the "FILTER PROBES" section of docs/nbdkit-probes.pod under
# that filter's name, and in the PROBES section of the filter's own
# page; and every probe the section lists exists in that filter's .so.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"

pod="$abs_top_srcdir/docs/nbdkit-probes.pod"
# "filter probe" pairs from the section.
awk '/^=head1 FILTER PROBES/ { on = 1; next }
     /^=head1 / { on = 0 }
     on && /^=head2 / { f = $2 }
     on && /^=item B</ { p = $2; sub(/^B</, "", p); sub(/>.*/, "", p); print f, p }' \
  "$pod" | sort > "$tmpdir/documented"
[ -s "$tmpdir/documented" ] || fail "no FILTER PROBES section in $pod"

: > "$tmpdir/built"
n=0
for so in "$abs_top_builddir"/filters/*/.libs/nbdkit-*-filter.so; do
  f="${so##*/nbdkit-}"; f="${f%-filter.so}"
  n=$((n + 1))
  readelf -n "$so" | awk -v f="$f" '
    /Provider:/ { prov = $2 }
    /Name:/ && prov == "nbdkit" { print f, $2 }' | sort -u >> "$tmpdir/built"
  # The filter's own page names each of its probes.
  page="$abs_top_srcdir/filters/$f/nbdkit-$f-filter.pod"
  while read -r _ p; do
    grep -q "$p" "$page" || fail "$p is not in $page"
  done < <(grep "^$f " "$tmpdir/built")
done
[ "$n" -ge 41 ] || fail "only $n filters built, expected 41"
sort -o "$tmpdir/built" "$tmpdir/built"
echo "$(wc -l < "$tmpdir/built") probes in $n filters"
if ! diff -u "$tmpdir/documented" "$tmpdir/built"; then
  fail "docs/nbdkit-probes.pod FILTER PROBES and the built filters differ (- documented only, + built only)"
fi
