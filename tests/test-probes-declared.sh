#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every probe (provider nbdkit) in the notes of a built plugin or filter
# .so is declared in its module's probes.d (or in the probes.d of a
# shared library that names the .so with @so) with as many arguments as
# its call sites pass, and every declared probe is in the .so: the
# declarations that tools/probes-gen.py turns into the tapset, the D
# translators, nbdkit-perf-events and nbdkit-probes(1) cannot drift from
# the code.  Then the check must catch, in a copy of the declarations,
# a probe left out, an argument dropped, and a probe declared that no
# .so fires.
source "$(dirname "$0")/functions.sh"
requires_cmd python3 readelf
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"
gen="$abs_top_srcdir/tools/probes-gen.py"

python3 "$gen" --top "$abs_top_srcdir" check-so "$abs_top_builddir" ||
  fail "the built .so files and their probes.d differ"

# A copy of the declarations, broken three ways.
top="$tmpdir/top"
(cd "$abs_top_srcdir" &&
 find server common plugins filters -maxdepth 2 -name probes.d) |
  while read -r f; do
    mkdir -p "$top/$(dirname "$f")"
    cp "$abs_top_srcdir/$f" "$top/$f"
  done
# cache_miss left out, cache_hit's last argument dropped.
sed -i -e '/probe cache_miss (/{N;d}' \
       -e '/probe cache_hit (/{N;s/,\n *uint64_t count);/);/}' \
  "$top/filters/cache/probes.d"
grep -q 'probe cache_hit (uint64_t id, uint64_t cookie, uint64_t offset);' \
     "$top/filters/cache/probes.d" ||
  fail "the test's edit of cache_hit did not apply"
# A probe that no .so fires.
sed -i 's/^};$/  \/* Never fired. *\/\n  probe delay_never (uint64_t x);\n};/' \
  "$top/filters/delay/probes.d"
python3 "$gen" --top "$top" check-so "$abs_top_builddir" > "$tmpdir/out" &&
  fail "the check passed declarations broken on purpose"
cat "$tmpdir/out"
grep -q 'probe cache_miss is not declared' "$tmpdir/out" ||
  fail "the check missed an undeclared probe"
grep -q 'probe cache_hit has 4 arguments, cache_hit declares 3' "$tmpdir/out" ||
  fail "the check missed an argument count"
grep -q 'declares delay_never, which is not in' "$tmpdir/out" ||
  fail "the check missed a declared probe that is not in the .so"
