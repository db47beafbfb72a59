#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/probe-overhead.sh --quick still works: one short round against
# this build (as both "probes" and "no-probes" unless NOPROBES_BUILD names
# a --disable-probes build), within 60 s, printing the markdown table with
# a row per build and workload and a numeric ratio.  Tracing (root, perf,
# bpftrace) is measured too where available.
source "$(dirname "$0")/functions.sh"
requires_cmd fio python3

bench="$abs_top_srcdir/bench/probe-overhead.sh"
[ -x "$bench" ] || fail "$bench is missing or not executable"
# The bench traces private copies of the binary, but it loads both cores
# for half a minute: run it alone so timing-sensitive tests stay calm.
tracing_lock
start=$SECONDS
status=0
TMPDIR="$tmpdir" timeout -k 5 60 "$bench" --quick \
  --probes "$abs_top_builddir" \
  --noprobes "${NOPROBES_BUILD:-$abs_top_builddir}" \
  > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
cat "$tmpdir/out"
echo "took $(( SECONDS - start )) s, status $status"
if [ "$status" -eq 77 ]; then
  cat "$tmpdir/err"; echo "$0: SKIP: the bench lacks a tool"; exit 77
fi
[ "$status" -eq 0 ] || { cat "$tmpdir/err"; fail "bench exited with $status"; }

grep -q '^| build | workload | median | min–max |' "$tmpdir/out" ||
  fail "no table header"
for wl in randread-4k seqread-1m randwrite-4k; do
  grep -Eq "^\| probes \| $wl QD[0-9]+ \| [0-9]+ (IOPS|MiB/s) \| [0-9]+–[0-9]+ \| [0-9.]+ \| [0-9]+\.[0-9]{3} " \
    "$tmpdir/out" || fail "no probes row with a ratio for $wl"
  grep -Eq "^\| noprobes \| $wl QD[0-9]+ \| [0-9]+ (IOPS|MiB/s) \|" \
    "$tmpdir/out" || fail "no noprobes row for $wl"
done
# Nothing left behind: servers, tracers, uprobes.
if ls "$tmpdir"/probe-overhead.* >/dev/null 2>&1; then
  fail "the bench left its work directory behind"
fi
