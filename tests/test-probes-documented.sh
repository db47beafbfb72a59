#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every probe a built plugin or filter carries (its USDT notes, provider
# nbdkit) is in the "PLUGIN PROBES" or "FILTER PROBES" section of
# docs/nbdkit-probes.pod under its name, and in its own page; and
# every probe those sections list exists in that .so.  The probes of
# the shared page stores (allocator_*) are in every .so that links
# them: they are documented once, under "allocators", and must be in
# the memory plugin.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"

pod="$abs_top_builddir/docs/nbdkit-probes.pod"
failed=0
for kind in plugin filter; do
  section="$(echo "$kind" | tr a-z A-Z) PROBES"
  # "name probe" pairs from the section.
  awk -v sec="=head1 $section" '
       $0 == sec { on = 1; next }
       /^=head1 / { on = 0 }
       on && /^=head2 / { f = $2 }
       on && /^=item B</ { p = $2; sub(/^B</, "", p); sub(/>.*/, "", p); print f, p }' \
    "$pod" | sort > "$tmpdir/documented.$kind"
  [ -s "$tmpdir/documented.$kind" ] || fail "no $section section in $pod"

  : > "$tmpdir/built.$kind"
  n=0
  for so in "$abs_top_builddir/${kind}s"/*/.libs/nbdkit-*-$kind.so; do
    name="${so##*/nbdkit-}"; name="${name%-$kind.so}"
    n=$((n + 1))
    readelf -n "$so" | awk -v f="$name" '
      /Provider:/ { prov = $2 }
      /Name:/ && prov == "nbdkit" {
        if ($2 ~ /^allocator_/) print "allocators", $2 > "/dev/stderr"
        else print f, $2
      }' 2>> "$tmpdir/allocators" | sort -u >> "$tmpdir/built.$kind"
    page="$abs_top_srcdir/${kind}s/$name/nbdkit-$name-$kind.pod"
    while read -r _ p; do
      grep -q "$p" "$page" || fail "$p is not in $page"
    done < <(grep "^$name " "$tmpdir/built.$kind")
  done
  [ "$kind" = plugin ] && sort -u "$tmpdir/allocators" >> "$tmpdir/built.$kind"
  sort -o "$tmpdir/built.$kind" "$tmpdir/built.$kind"
  echo "$kind: $(wc -l < "$tmpdir/built.$kind") probes in $n ${kind}s"
  if ! diff -u "$tmpdir/documented.$kind" "$tmpdir/built.$kind"; then
    echo "$0: $section and the built ${kind}s differ (- documented only, + built only)" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || fail "docs/nbdkit-probes.pod is out of step with the built .so files"
readelf -n "$abs_top_builddir/plugins/memory/.libs/nbdkit-memory-plugin.so" |
  grep -q 'Name: allocator_zstd_compress' ||
  fail "the memory plugin has no allocator_zstd_compress probe"
n=$(ls "$abs_top_builddir"/filters/*/.libs/nbdkit-*-filter.so | wc -l)
[ "$n" -ge 41 ] || fail "only $n filters built, expected 41"
