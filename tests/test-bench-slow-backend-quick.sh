#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/slow-backend.sh --quick still works: one short round of one
# connection to a delayed backend (1 ms and 10 ms per read, 16 and 64
# in flight), ours beside Debian's nbdkit, printing a row with numbers
# for both servers and the ratios for each of the four cases.
source "$(dirname "$0")/functions.sh"
requires_cmd fio
requires test -x /usr/bin/nbdkit
requires /usr/bin/python3 -c 'import nbd'

# It times requests: run it alone, as the other bench smoke tests do.
tracing_lock
run_bench slow-backend
grep -qx '## Slow backend' "$tmpdir/out" || bench_fail "no Slow backend section"
ms='[0-9]+\.[0-9] ms' ratio='[0-9]+\.[0-9]{2}'
for delay in 1ms 10ms; do
  for depth in 16 64; do
    grep -Eq "^\| $delay \| $depth \| $ms \| $ms \| $ratio \| [0-9]+ \| [0-9]+ \| $ratio \|$" \
      "$tmpdir/out" ||
        bench_fail "no row with numbers for $delay, $depth in flight"
  done
done
# Nothing of the run is left behind.
leftover="$(ls "$tmpdir" | grep '^slow-backend\.' || :)"
[ -z "$leftover" ] || bench_fail "left behind: $leftover"
