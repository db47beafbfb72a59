#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# docs/nbdkit-probes.pod, the probe table, names every probe of
# server/probes.d and no other.
source "$(dirname "$0")/functions.sh"

pod="$abs_top_builddir/docs/nbdkit-probes.pod"
[ -f "$pod" ] || fail "$pod is missing"
sed -n 's/^[[:space:]]*probe[[:space:]]\{1,\}\([a-z_0-9]*\).*/\1/p' \
  "$abs_top_srcdir/server/probes.d" | sort -u > "$tmpdir/declared"
[ -s "$tmpdir/declared" ] || fail "no probes in probes.d"
status=0
while read -r p; do
  grep -Eq "(^|[^a-z_])$p([^a-z_]|\$)" "$pod" ||
    { echo "probe $p is not in $pod"; status=1; }
done < "$tmpdir/declared"
# Probe names the table documents as =item or C<...> entries must exist.
grep -Eo '^=(item|head2|head3) +[a-z_]+' "$pod" | awk '{ print $2 }' |
  sort -u > "$tmpdir/documented"
if [ -s "$tmpdir/documented" ]; then
  extra="$(comm -13 "$tmpdir/declared" "$tmpdir/documented" |
           grep '_' || :)"
  [ -z "$extra" ] || { echo "documented but not declared: $extra"; status=1; }
fi
[ "$status" -eq 0 ] || fail "probe table and probes.d differ"
