#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Inputs that once made a fuzz target fail (fuzzing/regressions/) are
# replayed against the real server over a Unix socket, one connection
# each (fuzzing/replay.py): every connection must end, and the server
# must still serve a fresh client afterwards.  Where the fuzz targets
# have been built ("make fuzz") and are up to date, the inputs also go
# through them, under the sanitizers and the reply checker.
source "$(dirname "$0")/functions.sh"
requires_cmd python3

regressions="$abs_top_srcdir/fuzzing/regressions"
shopt -s nullglob
files=("$regressions"/connection-* "$regressions"/transmission-*)
if [ ${#files[@]} -eq 0 ]; then
  echo "$0: SKIP: no regression inputs"
  exit 77
fi

# The disk the fuzz harness serves (FUZZ_DISK_SIZE in fuzz-harness.h);
# fuzz-transmission inputs may ask for a read-only server.
size=1049810
start_server memory "$size"
ro_sock="$tmpdir/ro.sock"
"$NBDKIT" -f -r -U "$ro_sock" memory "$size" &
ro_pid=$!
cleanup_fn _kill_pid "$ro_pid"
wait_for 20 -S "$ro_sock" || fail "read-only server did not start"

t python3 "$abs_top_srcdir/fuzzing/replay.py" "$sock" "$ro_sock" "${files[@]}"
kill -0 "$server_pid" 2>/dev/null || fail "the server died"
kill -0 "$ro_pid" 2>/dev/null || fail "the read-only server died"

for target in connection transmission; do
  bin="$abs_top_builddir/fuzzing/fuzz-$target"
  inputs=("$regressions/$target"-*)
  [ -x "$bin" ] && [ ${#inputs[@]} -gt 0 ] || continue
  stale=$(find "$abs_top_srcdir/server" "$abs_top_srcdir/fuzzing" \
            "$abs_top_srcdir/plugins/memory" -name '*.[ch]' -newer "$bin" |
            head -1)
  if [ -n "$stale" ]; then
    echo "$0: not replaying through fuzz-$target: older than $stale"
    continue
  fi
  t "$bin" -runs=1 "${inputs[@]}" ||
    fail "fuzz-$target fails on a regression input"
done
