#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/metrics-cost.sh: what --metrics costs when nobody scrapes.  Our
# server (memory plugin, 1 GiB, pre-written, Unix socket) with and
# without --metrics=unix:PATH, in slots whose order alternates from
# round to round: fio (ioengine=nbd) 4 KiB random read and random write
# at QD32, one connection; the IOPS and the server's CPU time per
# request (utime+stime from /proc/PID/stat).  Prints a markdown report:
# medians, on ÷ off of the medians and the median of the per-round
# ratios; --write-results also puts it in bench/RESULTS.md as the
# section "## Metrics cost".
#
#   bench/metrics-cost.sh [--rounds N] [--runtime SECONDS] [--quick]
#        [--build DIR] [--write-results]
#
# Defaults: 5 rounds, 5 s per fio run.  --quick: 1 round of 1 s runs.
# Needs fio with its nbd engine (exit 77 without fio).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5 runtime=5 write_results=0
build="${BENCH_BUILD:-$srcdir}"
cmdline="bench/metrics-cost.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --quick) rounds=1 runtime=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"

work="$(mktemp -d "${TMPDIR:-/tmp}/metrics-cost.XXXXXX")"
pids=()
srv_pid=
cleanup ()
{
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  rm -rf "$work"
}
trap_cleanup

sock="$work/nbd.sock"
uri="nbd+unix:///?socket=$sock"
start ()
{
  local side="$1" extra=()
  [ "$side" = on ] && extra=(--metrics="unix:$work/metrics.sock")
  rm -f "$sock" "$work/metrics.sock"
  "$build/nbdkit" -f -U "$sock" "${extra[@]}" memory 1G &
  srv_pid=$!
  local i
  for (( i = 0; i < 100; i++ )); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || die "the server did not listen"
  # Pre-write the disk so that reads copy data, not holes.
  nbdcopy --target-is-zero <(head -c 1G /dev/urandom) "$uri" 2>/dev/null ||
    /usr/bin/python3 -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
b = bytes(range(256)) * 4096 * 4
for off in range(0, 1 << 30, len(b)): h.pwrite(b, off)
h.shutdown()' "$uri"
}
stop () { kill_pid "$srv_pid"; srv_pid=; }

run ()
{
  local side="$1" wl="$2" r="$3" rw t0 t1 iops
  rw=${wl%-4k}
  note "round $r: metrics $side, $wl"
  start "$side"
  t0=$(cpu_ticks "$srv_pid")
  bounded $((runtime + 60)) "$work/fio.log" \
    fio --name=bench --ioengine=nbd --uri="$uri" --rw="$rw" \
        --bs=4k --iodepth=32 --numjobs=1 --size=1G \
        --runtime="$runtime" --time_based --norandommap \
        --randrepeat=0 --output-format=json --output="$work/fio.json" ||
    { cat "$work/fio.log" >&2; die "fio failed"; }
  t1=$(cpu_ticks "$srv_pid")
  read -r iops ios < <(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
k = "read" if "read" in sys.argv[2] else "write"
print("%.0f %d" % (j[k]["iops"], j[k]["total_ios"]))' "$work/fio.json" "$rw")
  echo "$side $wl iops $iops" >> "$results"
  python3 -c 'import sys
t, hz, n = int (sys.argv[1]), int (sys.argv[2]), max (1, int (sys.argv[3]))
print ("%.3f" % (t * 1e6 / hz / n))' "$((t1 - t0))" "$(getconf CLK_TCK)" "$ios" |
    sed "s/^/$side $wl cpu_us /" >> "$results"
  stop
}

results="$work/results"
: > "$results"
workloads=(randread-4k randwrite-4k)
interleave run off on

report="$work/report"
python3 - "$results" "$rounds" "$runtime" "$(ours_version "$build")" \
  "$cmdline" "$(date -u '+%Y-%m-%d %H:%M UTC')" > "$report" <<'PY'
import sys, statistics as st
res, rounds, runtime, ver, cmd, date = sys.argv[1:]
d = {}
for l in open (res):
    side, wl, kind, v = l.split ()
    d.setdefault ((wl, kind, side), []).append (float (v))
print ("## Metrics cost\n")
print ("What `--metrics` costs with nobody scraping: %s; %s rounds of %s s "
       "fio runs (4 KiB, QD32, one connection, memory plugin, Unix socket), "
       "the two sides alternating.  `%s`, %s.\n" % (ver, rounds, runtime, cmd, date))
print ("| workload | IOPS off | IOPS on | on ÷ off | per-round ratio, median (min–max) | CPU µs/req off | on |")
print ("|---|---:|---:|---:|---|---:|---:|")
for wl in ("randread-4k", "randwrite-4k"):
    off, on = d[(wl, "iops", "off")], d[(wl, "iops", "on")]
    ratios = [b / a for a, b in zip (off, on)]
    co, cn = d[(wl, "cpu_us", "off")], d[(wl, "cpu_us", "on")]
    print ("| %s | %.0f | %.0f | %.3f | %.3f (%.3f–%.3f) | %.2f | %.2f |" % (
        wl, st.median (off), st.median (on), st.median (on) / st.median (off),
        st.median (ratios), min (ratios), max (ratios), st.median (co), st.median (cn)))
PY
cat "$report"
[ "$write_results" -eq 0 ] || write_section "Metrics cost" "$report"
