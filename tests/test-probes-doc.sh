#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# docs/nbdkit-probes.pod, the probe table, names every probe of
# server/probes.d and no other; nbdkit-tracing(1) gives the true number
# of probe places in the server binary (the notes of provider nbdkit).
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

# The number of probe places, in a build with probes and without
# sanitizers (whose inlining may copy a probe to a second place).
if grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h" &&
   [ -z "${NBDKIT_SANITIZERS:-}" ] && command -v readelf > /dev/null; then
  sites="$(readelf -n "$server_binary" |
           awk '/Provider:/ { p = $2 } /Name:/ && p == "nbdkit" { n++ }
                END { print n + 0 }')"
  said="$(tr '\n' ' ' < "$abs_top_srcdir/docs/nbdkit-tracing.pod" |
          grep -Eo 'The server has [0-9]+ probe places' | grep -Eo '[0-9]+')"
  [ "$said" = "$sites" ] ||
    fail "nbdkit-tracing(1) says ${said:-no number of} probe places, the server has $sites"
fi
