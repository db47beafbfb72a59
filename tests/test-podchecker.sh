#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every POD page in the tree is well formed (podchecker, warnings
# included), pod2man turns it into a man page without a complaint, and
# every page in docs/ is listed in docs/Makefile.am, so it installs.
source "$(dirname "$0")/functions.sh"
requires_cmd podchecker pod2man

# Pages made by the build (docs/nbdkit-probes.pod) are in the build
# tree, which is another folder in a VPATH build.
{ find "$abs_top_srcdir" -name '*.pod' \
       -not -path '*/autom4te.cache/*' -not -path '*/.git/*'
  if [ "$abs_top_builddir" != "$abs_top_srcdir" ]; then
    find "$abs_top_builddir/docs" -name '*.pod'
  fi
} | sort -u > "$tmpdir/pods"
n=$(wc -l < "$tmpdir/pods")
[ "$n" -ge 10 ] || fail "found only $n .pod files under $abs_top_srcdir"

bad=0
while read -r pod; do
  if ! podchecker -warnings -warnings "$pod" > "$tmpdir/out" 2>&1 ||
     grep -q 'WARNING\|ERROR' "$tmpdir/out"; then
    cat "$tmpdir/out"
    bad=1
  fi
  if ! pod2man --stderr --errors=stderr "$pod" > /dev/null 2> "$tmpdir/err" ||
     [ -s "$tmpdir/err" ]; then
    echo "pod2man $pod:"; cat "$tmpdir/err"
    bad=1
  fi
done < "$tmpdir/pods"
[ "$bad" -eq 0 ] || fail "POD problems above"

# Each page in docs/ is in man_pod or man3_pod (a list may span lines,
# and later "man_pod += ..." lines add to it).
awk '/^man3?_pod *\+?=/ { on = 1 } on { print } on && !/\\$/ { on = 0 }' \
    "$abs_top_srcdir/docs/Makefile.am" |
  tr ' \t\\' '\n\n\n' | grep '\.pod$' | sort > "$tmpdir/listed"
{ (cd "$abs_top_srcdir/docs" && ls *.pod)
  (cd "$abs_top_builddir/docs" && ls *.pod)
} | sort -u > "$tmpdir/present"
diff -u "$tmpdir/present" "$tmpdir/listed" ||
  fail "docs/*.pod and man_pod in docs/Makefile.am differ"

# Every link to one of our pages names the section it is installed in:
# section 3 for the APIs and language plugins (man3_pod), 1 for the
# rest (man_pod), as `man 3 nbdkit-plugin' finds them.
find "$abs_top_srcdir" -name Makefile.am -not -path '*/autom4te.cache/*' |
  while read -r mk; do
    awk '/^man3?_pod *\+?=/ { on = 1; sec = ($1 ~ /man3/) ? 3 : 1 }
         on { n = split ($0, w, /[ \t\\]+/)
              for (i = 1; i <= n; i++) if (w[i] ~ /\.pod$/) {
                sub (/\.pod$/, "", w[i]); print w[i] "(" sec ")" } }
         on && !/\\$/ { on = 0 }' "$mk"
  done | sort -u > "$tmpdir/sections"
grep -c '(3)$' "$tmpdir/sections" | grep -qx 13 ||
  { cat "$tmpdir/sections"; fail "expected 13 pages in section 3"; }
grep -qx 'nbdkit-plugin(3)' "$tmpdir/sections" || fail "nbdkit-plugin is not in section 3"
grep -hoE 'L<nbdkit(-[a-zA-Z0-9_]+)*\([0-9]\)' $(cat "$tmpdir/pods") |
  sed 's/^L<//' | sort -u > "$tmpdir/linked"
missing=$(comm -23 "$tmpdir/linked" "$tmpdir/sections" | tr '\n' ' ')
[ -z "$missing" ] || fail "links to pages not installed under that name and section: $missing"
echo "$n pages checked"
