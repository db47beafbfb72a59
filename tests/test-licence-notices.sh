#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every source file of the tree carries the one-line licence notice in
# its first lines (after a #! line), and LICENSE holds the BSD-3-Clause
# text it points at.  Checked in the source tree, by file kind, so it
# runs the same in a git checkout and in CI's copies of the sources.
source "$(dirname "$0")/functions.sh"

top="$abs_top_srcdir"
grep -q '^BSD 3-Clause License$' "$top/LICENSE" || fail "LICENSE is not BSD-3-Clause"

missing=()
n=0
while IFS= read -r -d '' f; do
  n=$((n + 1))
  head -3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause' ||
    missing+=("${f#"$top"/}")
done < <(find "$top" \( -name '_build*' -o -name .git -o -name autom4te.cache \
                        -o -name build-aux -o -name .deps -o -name .libs -o -name config.h.in \
                        -o -path "$top/fuzzing/corpus-*" \
                        -o -path "$top/fuzzing/regressions" \) -prune -o \
              -type f \( -name '*.c' -o -name '*.h.in' -o -name '*.sh' \
                         -o -name '*.py' -o -name '*.bt' -o -name '*.syms' \
                         -o -name 'Makefile.am' -o -name configure.ac \
                         -o -name '*.mk' -o -name '*.stp.in' \
                         -o -name probes.d \) -print0)
# Headers, less the ones configure and dtrace generate.
while IFS= read -r -d '' f; do
  case "$f" in */config.h|*/probes.h|*/nbdkit-version.h) continue ;; esac
  n=$((n + 1))
  head -3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause' ||
    missing+=("${f#"$top"/}")
done < <(find "$top" \( -name '_build*' -o -name .git \) -prune -o \
              -type f -name '*.h' -print0)

echo "checked $n files"
[ "$n" -gt 200 ] || fail "only $n source files found under $top"
[ "${#missing[@]}" -eq 0 ] ||
  fail "no licence notice in: ${missing[*]}"
