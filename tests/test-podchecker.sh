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

# Each page in docs/ is in man_pod (the list may span lines, and
# later "man_pod += ..." lines add to it).
awk '/^man_pod *\+?=/ { on = 1 } on { print } on && !/\\$/ { on = 0 }' \
    "$abs_top_srcdir/docs/Makefile.am" |
  tr ' \t\\' '\n\n\n' | grep '\.pod$' | sort > "$tmpdir/listed"
{ (cd "$abs_top_srcdir/docs" && ls *.pod)
  (cd "$abs_top_builddir/docs" && ls *.pod)
} | sort -u > "$tmpdir/present"
diff -u "$tmpdir/present" "$tmpdir/listed" ||
  fail "docs/*.pod and man_pod in docs/Makefile.am differ"
echo "$n pages checked"
