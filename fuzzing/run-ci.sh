#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fuzzing/run-ci.sh BUILD_DIR SECONDS: build the fuzz targets in BUILD_DIR
# (a configured build tree: "make fuzz"), then run each target for
# SECONDS seconds, one at a time, starting from a copy of its seed corpus
# and the regression inputs (so the repository is never modified).
# Fails if a target crashes, leaks, times out or cannot start; prints
# each target's executions and coverage.  Crashing inputs are kept in
# the work directory it names.
set -euo pipefail

if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
seconds=$2
srcdir=$(cd "$(dirname "$0")" && pwd)

make -C "$build" fuzz >/dev/null

work=$(mktemp -d /tmp/nbdkit-fuzz.XXXXXX)
status=0
for target in connection transmission data; do
  bin="$build/fuzzing/fuzz-$target"
  corpus="$work/corpus-$target"
  mkdir -p "$corpus" "$work/artifacts-$target"
  cp "$srcdir/corpus-$target"/* "$corpus"/
  cp "$srcdir/regressions/$target"-* "$corpus"/ 2>/dev/null || :
  dict="$srcdir/nbd.dict"
  [ ! -f "$srcdir/$target.dict" ] || dict="$srcdir/$target.dict"
  log="$work/$target.log"
  echo "fuzz-$target: ${seconds}s"
  # -timeout: one input may take this long; the harness itself gives up
  # on a server silent for 10 s.  -rss_limit_mb bounds a runaway input.
  if "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
       -dict="$dict" -print_final_stats=1 -workers=1 \
       -artifact_prefix="$work/artifacts-$target/" \
       "$corpus" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || :)
  echo "fuzz-$target: $result: ${execs:-?} executions, ${speed:-?}/s, ${cov:-no coverage line}"
  if [ $result = FAILED ]; then
    grep -E 'ERROR|reply-checker|fuzz-harness|runtime error|SUMMARY' "$log" | head -20 >&2 || :
    echo "fuzz-$target: log and crashing input in $work" >&2
  fi
done
[ $status -ne 0 ] || rm -rf "$work"
exit $status
