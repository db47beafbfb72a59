#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/plugins.sh --quick still works: one short round of our plugins
# beside Debian's nbdkit running the same commands, printing a table
# with numbers for both servers and a ratio on every row (pattern reads,
# zero handshakes, the zstd memory rows), and leaving no server or file
# behind.
source "$(dirname "$0")/functions.sh"
requires_cmd fio nbdcopy nbdinfo
requires test -x /usr/bin/nbdkit
requires /usr/bin/python3 -c 'import nbd'

# It loads both cores: run it alone, as the other bench smoke tests do.
tracing_lock
# Directories of an earlier run that was killed are not this run's.
shm_before="$(ls /dev/shm | grep "^bench-plugins\." || :)"
run_bench plugins

grep -qx '## Plugins' "$tmpdir/out" || bench_fail "no Plugins section"
ratio='[0-9]+\.[0-9]{2}'
for row in "pattern \| 4K randread QD32 \| [0-9]+ IOPS \| [0-9]+ IOPS" \
           "pattern \| nbdcopy to null: \| [0-9.]+ MiB/s \| [0-9.]+ MiB/s" \
           "zero \| handshakes \| [0-9]+ conn/s \| [0-9]+ conn/s"; do
  grep -Eq "^\| $row \| $ratio \|$" "$tmpdir/out" ||
    bench_fail "no row with numbers for: $row"
done
if grep -q 'allocator=zstd: not available' "$tmpdir/out"; then
  echo "zstd allocator not available: its rows are not checked"
else
  z="memory allocator=zstd" low="\(lower is better\)"
  mib="[0-9.]+ MiB \| [0-9.]+ MiB"
  for row in "$z \| 1M write QD8 \(fill\) \| [0-9.]+ MiB/s \| [0-9.]+ MiB/s" \
             "$z \| VmRSS after fill $low \| $mib" \
             "$z \| 4K randwrite QD32 \| [0-9]+ IOPS \| [0-9]+ IOPS" \
             "$z \| VmHWM \(peak\) $low \| $mib"
  do
    grep -Eq "^\| $row \| $ratio \|$" "$tmpdir/out" ||
      bench_fail "no row with numbers for: $row"
  done
fi
# Nothing left behind: no /dev/shm directory, no work directory.
shm_after="$(ls /dev/shm | grep "^bench-plugins\." || :)"
left="$(comm -13 <(echo "$shm_before") <(echo "$shm_after") | grep . || :)"
[ -z "$left" ] || bench_fail "a /dev/shm directory was left: $left"
ls "$tmpdir" | grep -q "^bench-plugins\." &&
  bench_fail "a work directory was left"
exit 0
