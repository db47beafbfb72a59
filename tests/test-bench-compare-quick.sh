#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/compare.sh --quick still works: one short round against this
# build and whichever peers are installed, within 60 s, printing a table
# per transport with our rows (4 KiB random read, 1 MiB sequential read)
# carrying numbers, the stream limits, and leaving no server or file
# behind.
source "$(dirname "$0")/functions.sh"
requires_cmd fio

bench="$abs_top_srcdir/bench/compare.sh"
[ -x "$bench" ] || fail "$bench is missing or not executable"
# It loads both cores for half a minute: run it alone, so that the
# timing-sensitive tests stay calm and its numbers mean something.
tracing_lock
start=$SECONDS
status=0
TMPDIR="$tmpdir" timeout -k 5 60 "$bench" --quick --build "$abs_top_builddir" \
  > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
cat "$tmpdir/out"
echo "took $(( SECONDS - start )) s, status $status"
[ "$status" -eq 0 ] || { cat "$tmpdir/err"; fail "bench exited with $status"; }

for tr in "Unix socket" "TCP, 127.0.0.1"; do
  grep -qx "### $tr" "$tmpdir/out" || fail "no table for $tr"
done
header='| server | workload | median | min–max | CPU µs/req | peak RSS MiB | ours ÷ this server |'
[ "$(grep -cF "$header" "$tmpdir/out")" -eq 2 ] || fail "no table header"
for wl in "4K randread QD32 \| [0-9.]+ IOPS" "1M seqread QD8 \| [0-9.]+ MiB/s"; do
  n="$(grep -Ec "^\| ours \| $wl \| [0-9.]+–[0-9.]+ \| [0-9]+\.[0-9]{2} \| [0-9]+ \| 1\.000 \|" \
        "$tmpdir/out" || :)"
  [ "$n" -eq 2 ] || fail "expected 2 rows of ours with numbers for '$wl', got $n"
done
# The limits: plain unix, unix-grown (the send buffer ours grows) and
# tcp; our Unix 1 MiB reads are measured against unix-grown, with
# their share of plain unix beside it.
for tr in unix unix-grown tcp; do
  grep -Eq "^\| $tr \| [0-9]+ \| [0-9.]+–[0-9.]+ \|$" "$tmpdir/out" ||
    fail "no limit row for $tr"
done
grep -Eq "^\| ours \| 1M seqread QD8 \| .* \| [0-9]+% \([0-9]+% of unix\) \|$" \
  "$tmpdir/out" || fail "our Unix 1M seqread is not against unix-grown"
# Nothing left behind: work directories, backing files, servers.
dirs="$(sed -n 's/^# \[[0-9]* s\] work directories: //p' "$tmpdir/err")"
[ -n "$dirs" ] || fail "the bench did not say where it works"
for d in $dirs; do
  [ ! -e "$d" ] || fail "the bench left $d behind"
done
pids="$(sed -n 's/^# \[[0-9]* s\] server [^ ]* pid \([0-9]*\) .*/\1/p' "$tmpdir/err")"
[ -n "$pids" ] || fail "the bench started no server"
for p in $pids; do
  ! kill -0 "$p" 2>/dev/null || fail "the bench left server $p running"
done
