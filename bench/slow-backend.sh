#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/slow-backend.sh: one connection to a backend whose every read
# takes a fixed time (the delay filter over the memory plugin, rdelay=
# 1 ms and 10 ms), our server against Debian's nbdkit, with 16 and 64
# reads in flight.  Both servers run requests on up to 16 threads per
# connection (-t, 16 by default), so the ceiling is 16 reads per delay.
# Two figures per row:
#  - the first burst: a fresh connection sends DEPTH 4 KiB reads at
#    once and waits for all of them (python3-libnbd); the time until
#    the last reply, median of 5 bursts per round.  This is what a
#    client meets first (and what a pool that grows only after slow
#    requests finish made long);
#  - steady IOPS: fio (ioengine=nbd) 4 KiB random read at QD DEPTH for
#    --runtime seconds on one connection.
# Servers alternate slots in an order that rotates from round to round.
# Prints a markdown report (medians, ours ÷ nbdkit); --write-results
# also puts it in bench/RESULTS.md as the section "## Slow backend".
#
#   bench/slow-backend.sh [--rounds N] [--runtime SECONDS] [--quick]
#        [--build DIR] [--write-results]
#
# Defaults: 3 rounds, 5 s per fio run.  --quick: 1 round of 1 s runs
# (a smoke test).  --build: our built tree (default $BENCH_BUILD or
# the tree this script is in).  Needs fio with its nbd engine,
# python3-libnbd (Debian's /usr/bin/python3) and Debian's
# /usr/bin/nbdkit (exit 77 without fio or Debian's nbdkit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=5 write_results=0
build="${BENCH_BUILD:-$srcdir}"
cmdline="bench/slow-backend.sh $*"
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
[ -x /usr/bin/nbdkit ] || { echo "$0: Debian's nbdkit not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
/usr/bin/python3 -c 'import nbd' 2>/dev/null || die "python3-libnbd not found"

work="$(mktemp -d "${TMPDIR:-/tmp}/slow-backend.XXXXXX")"
pids=()
srv_pid=
cleanup ()
{
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || :; done
  rm -rf "$work"
}
trap_cleanup

cat > "$work/burst.py" <<'PY'
import nbd, sys, time
uri, depth, times = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(times):
    h = nbd.NBD()
    h.connect_uri(uri)
    bufs = [nbd.Buffer(4096) for i in range(depth)]
    t = time.monotonic()
    for i, b in enumerate(bufs):
        h.aio_pread(b, (n * depth + i) * 65536)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    print("%.6f" % (time.monotonic() - t))
    h.shutdown()
PY

# start SERVER DELAY: one server on a fresh socket.
start ()
{
  local bin="$build/nbdkit" sock="$work/sock"
  [ "$1" = nbdkit ] && bin=/usr/bin/nbdkit
  rm -f "$sock"
  "$bin" -f -U "$sock" --filter=delay memory 1G rdelay="$2" \
    >"$work/server.log" 2>&1 &
  srv_pid=$!
  local i
  for (( i = 0; i < 100; i++ )); do
    [ -S "$sock" ] && return 0
    sleep 0.05
  done
  cat "$work/server.log" >&2
  die "$1 did not start"
}

stop () { kill_pid "$srv_pid"; wait "$srv_pid" 2>/dev/null || :; srv_pid=; }

uri="nbd+unix:///?socket=$work/sock"
servers=(ours nbdkit)
results="$work/results"
: > "$results"
for (( r = 1; r <= rounds; r++ )); do
  for delay in 1ms 10ms; do
    for depth in 16 64; do
      order=("${servers[@]}")
      (( r % 2 == 0 )) && order=(nbdkit ours)
      for srv in "${order[@]}"; do
        note "round $r: $srv, rdelay=$delay, $depth in flight"
        start "$srv" "$delay"
        bounded 120 "$work/burst.out" /usr/bin/python3 "$work/burst.py" \
          "$uri" "$depth" 5 || { cat "$work/burst.out" >&2; die "burst failed"; }
        while read -r s; do
          echo "$srv $delay $depth burst $s" >> "$results"
        done < "$work/burst.out"
        bounded $((runtime + 60)) "$work/fio.log" \
          fio --name=bench --ioengine=nbd --uri="$uri" --rw=randread \
              --bs=4k --iodepth="$depth" --numjobs=1 --size=1G \
              --runtime="$runtime" --time_based --norandommap \
              --randrepeat=0 --output-format=json --output="$work/fio.json" ||
          { cat "$work/fio.log" >&2; die "fio failed"; }
        iops=$(python3 -c 'import json, sys
print("%.0f" % json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"])' \
          "$work/fio.json")
        echo "$srv $delay $depth iops $iops" >> "$results"
        stop
      done
    done
  done
done

report="$work/report.md"
python3 - "$results" "$rounds" "$runtime" "$cmdline" > "$report" <<'PY'
import statistics, sys
path, rounds, runtime, cmdline = sys.argv[1:5]
data = {}
for line in open(path):
    srv, delay, depth, what, v = line.split()
    data.setdefault((delay, int(depth), what, srv), []).append(float(v))
def med(k):
    return statistics.median(data[k]) if k in data else float("nan")
print("## Slow backend\n")
print("`%s`: one connection to `--filter=delay memory 1G rdelay=DELAY`, "
      "4 KiB reads; %s rounds, fio runs of %s s, 5 first bursts per "
      "round; both servers at their default of 16 threads per "
      "connection (so at most 16 reads per DELAY).  First burst: a new "
      "connection sends DEPTH reads at once, time until the last "
      "reply (lower is better).  Medians.\n" % (cmdline, rounds, runtime))
print("| delay | in flight | first burst, ours | nbdkit | ours ÷ nbdkit "
      "| IOPS, ours | nbdkit | ours ÷ nbdkit |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for delay in ("1ms", "10ms"):
    for depth in (16, 64):
        bo, bn = med((delay, depth, "burst", "ours")), \
                 med((delay, depth, "burst", "nbdkit"))
        io, inn = med((delay, depth, "iops", "ours")), \
                  med((delay, depth, "iops", "nbdkit"))
        print("| %s | %d | %.1f ms | %.1f ms | %.2f | %.0f | %.0f | %.2f |"
              % (delay, depth, bo * 1000, bn * 1000, bo / bn, io, inn,
                 io / inn))
PY
cat "$report"
if [ "$write_results" -eq 1 ]; then
  write_section "Slow backend" "$report"
fi
