#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/filters.sh --quick still works: one short round of our filters
# beside Debian's nbdkit with its own, printing a table over the memory
# plugin with numbers for both servers and a ratio on every row, and
# leaving no server or file behind.
source "$(dirname "$0")/functions.sh"
requires_cmd fio nbdcopy sfdisk
requires test -x /usr/bin/nbdkit

# It loads both cores: run it alone, as the other bench smoke tests do.
tracing_lock
# Directories of an earlier run that was killed are not this run's.
shm_before="$(ls /dev/shm | grep "^bench-filters\." || :)"
run_bench filters

grep -qx '### Over the memory plugin' "$tmpdir/out" ||
  bench_fail "no memory table"
for stack in plain offset cow; do
  for wl in "4K randread QD32 \| [0-9]+ IOPS \| [0-9]+ IOPS" \
            "nbdcopy out \| [0-9.]+ MiB/s \| [0-9.]+ MiB/s"; do
    grep -Eq "^\| $stack \| $wl \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9]{2} \|$" \
      "$tmpdir/out" || bench_fail "no row with numbers for $stack: $wl"
  done
done
# Nothing left behind: no server of ours, no work directory.
shm_after="$(ls /dev/shm | grep "^bench-filters\." || :)"
left="$(comm -13 <(echo "$shm_before") <(echo "$shm_after") | grep . || :)"
[ -z "$left" ] || bench_fail "a /dev/shm directory was left: $left"
ls "$tmpdir" | grep -q "^bench-filters\." &&
  bench_fail "a work directory was left"
exit 0
