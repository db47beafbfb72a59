#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The CI guard on what the request path costs: the untraced server's
# user-space instructions per 4 KiB read, counted by callgrind
# (bench/probe-instructions.sh --check), may not grow by more than 2%
# over tests/probe-instructions.baseline.  A change that means to cost
# more re-records the baseline with
#   bench/probe-instructions.sh --update-baseline
# and commits it.  callgrind counts instructions, not time, so a loaded
# machine gives the same figure (within an instruction or two).
source "$(dirname "$0")/functions.sh"
requires_cmd valgrind
skip_under_sanitizers "valgrind cannot run a sanitizer-instrumented binary"

bench="$abs_top_srcdir/bench/probe-instructions.sh"
[ -x "$bench" ] || fail "$bench is missing or not executable"
status=0
TMPDIR="$tmpdir" t "$bench" --check --probes "$abs_top_builddir" \
  --baseline "$abs_top_srcdir/tests/probe-instructions.baseline" \
  > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
cat "$tmpdir/out" "$tmpdir/err"
case $status in
  0) grep -q '^instructions per 4 KiB read' "$tmpdir/out" ||
       fail "the bench printed no count" ;;
  77) exit 77 ;;
  *) fail "the untraced request path costs more than the baseline allows (status $status)" ;;
esac
