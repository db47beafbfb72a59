#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/async-in-flight.sh: one connection keeping DEPTH (256) 4 KiB
# reads in flight against a backend that takes DELAY (10 ms) per
# request.  The ceiling is DEPTH reads per DELAY (25600/s); what each
# server reaches, and how many threads it has meanwhile:
#
#   async        our example-async plugin delay=10, which completes each
#                request later from a thread of its own per connection
#                (nbdkit-async(3));
#   async-loop   the same with loop=server: completed from the server's
#                event loop, no thread of the plugin's;
#   sync         the same plugin with -D nbdkit.async=0: the synchronous
#                path, a worker per request in progress (up to -t);
#   delay        our memory plugin under the delay filter (rdelay=10ms),
#                the synchronous path of an ordinary plugin;
#   nbdkit       Debian's nbdkit 1.32 running the same delay + memory.
#
# Two clients, each on one connection: fio (ioengine=nbd, iodepth
# DEPTH, random reads) for --runtime seconds against every server, and
# against the asynchronous ones nbdcopy (--requests=DEPTH
# --request-size=4096) copying the whole disk to null:, timed; the disk
# holds as many reads as the ceiling allows in --runtime seconds (at the
# synchronous servers' pace the copy would take minutes).  The server's
# thread count (/proc/PID/task) is sampled every 50 ms meanwhile and
# the largest is reported.  Servers
# take turns in an order rotated from round to round; medians.
# --write-results puts the report in bench/RESULTS.md as the section
# "## Requests in flight against a slow backend".
#
#   bench/async-in-flight.sh [--rounds N] [--runtime SECONDS]
#        [--depth N] [--delay MS] [--quick] [--build DIR]
#        [--write-results]
#
# Defaults: 3 rounds, 5 s runs, 256 in flight, 10 ms.  --quick: 1 round
# of 1 s runs (a smoke test).  Needs fio with its nbd engine and
# Debian's /usr/bin/nbdkit (exit 77 without them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=5 depth=256 delay_ms=10 write_results=0
build="${BENCH_BUILD:-$srcdir}"
cmdline="bench/async-in-flight.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --depth) depth="$2"; shift 2 ;;
    --delay) delay_ms="$2"; shift 2 ;;
    --quick) rounds=1 runtime=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --depth "$depth" \
  --delay "$delay_ms"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
command -v nbdcopy >/dev/null || die "nbdcopy not found"
[ -x /usr/bin/nbdkit ] || { echo "$0: Debian's nbdkit not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"

work="$(mktemp -d "${TMPDIR:-/tmp}/async-in-flight.XXXXXX")"
pids=()
srv_pid=
sampler=
cleanup ()
{
  local status=$?
  set +e
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
  exit $status
}
trap_cleanup

# start NAME: that server on a fresh socket.
start ()
{
  local sock="$work/sock" ours="$build/nbdkit"
  rm -f "$sock"
  case "$1" in
    async) set -- "$ours" example-async size="$bytes" delay="$delay_ms" ;;
    async-loop) set -- "$ours" example-async size="$bytes" delay="$delay_ms" \
                       loop=server ;;
    sync) set -- "$ours" -D nbdkit.async=0 example-async size="$bytes" \
                 delay="$delay_ms" ;;
    delay) set -- "$ours" --filter=delay memory "$bytes" \
                  rdelay="${delay_ms}ms" ;;
    nbdkit) set -- /usr/bin/nbdkit --filter=delay memory "$bytes" \
                   rdelay="${delay_ms}ms" ;;
  esac
  local bin="$1"
  shift
  "$bin" -f -U "$sock" "$@" >"$work/server.log" 2>&1 &
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

# Sample the server's thread count into $work/threads until killed.
sample_threads ()
{
  local most=0 n
  while :; do
    n=$(ls "/proc/$srv_pid/task" 2>/dev/null | wc -l)
    (( n > most )) && { most=$n; echo "$most" > "$work/threads"; }
    sleep 0.05
  done
}

uri="nbd+unix:///?socket=$work/sock"
# The disk: the ceiling's worth of 4 KiB reads for RUNTIME seconds.
bytes=$(( depth * 1000 / delay_ms * runtime * 4096 ))
servers=(async async-loop sync delay nbdkit)
results="$work/results"
: > "$results"
for (( r = 1; r <= rounds; r++ )); do
  order=("${servers[@]:r % 5}" "${servers[@]:0:r % 5}")
  for srv in "${order[@]}"; do
    note "round $r: $srv, $depth in flight, ${delay_ms} ms"
    start "$srv"
    echo 0 > "$work/threads"
    sample_threads &
    sampler=$!
    bounded $((runtime + 60)) "$work/fio.log" \
      fio --name=bench --ioengine=nbd --uri="$uri" --rw=randread \
          --bs=4k --iodepth="$depth" --numjobs=1 --size="$bytes" \
          --runtime="$runtime" --time_based --norandommap \
          --randrepeat=0 --output-format=json --output="$work/fio.json" ||
      { cat "$work/fio.log" >&2; die "fio failed"; }
    iops=$(python3 -c 'import json, sys
print("%.0f" % json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"])' \
      "$work/fio.json")
    echo "$srv iops $iops" >> "$results"
    if [[ "$srv" == async* ]]; then
      t0=$(date +%s.%N)
      bounded $((runtime * 20 + 60)) "$work/copy.log" \
        nbdcopy --requests="$depth" --request-size=4096 --connections=1 \
          "$uri" null: ||
        { cat "$work/copy.log" >&2; die "nbdcopy failed"; }
      t1=$(date +%s.%N)
      echo "$srv copy $(awk -v b="$bytes" -v a="$t0" -v z="$t1" \
        'BEGIN { printf "%.0f", b / 4096 / (z - a) }')" >> "$results"
    fi
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || :
    sampler=
    echo "$srv threads $(cat "$work/threads")" >> "$results"
    stop
  done
done

report="$work/report.md"
python3 - "$results" "$rounds" "$runtime" "$depth" "$delay_ms" \
  "$cmdline" "$(nproc)" > "$report" <<'PY'
import statistics, sys
path, rounds, runtime, depth, delay, cmdline, cpus = sys.argv[1:8]
depth, delay = int(depth), float(delay)
data = {}
for line in open(path):
    srv, what, v = line.split()
    data.setdefault((srv, what), []).append(float(v))
def med(srv, what):
    return statistics.median(data[(srv, what)])
ceiling = depth * 1000.0 / delay
print("## Requests in flight against a slow backend\n")
print("`%s`: one connection, fio 4 KiB random reads at iodepth %d, a "
      "backend taking %g ms per request, so at most %.0f reads/s; %s "
      "round(s) of %s s per server, medians; %s CPUs.  Threads: the most "
      "the server process had during the run (every 50 ms).\n"
      % (cmdline, depth, delay, ceiling, rounds, runtime, cpus))
print("| server | fio, reads/s | of the ceiling | nbdcopy, reads/s | of the ceiling | threads |")
print("|---|---:|---:|---:|---:|---:|")
names = {
    "async": "ours, example-async (completes from its own thread)",
    "async-loop": "ours, example-async loop=server (the server's event loop)",
    "sync": "ours, example-async with -D nbdkit.async=0",
    "delay": "ours, delay filter + memory (synchronous)",
    "nbdkit": "nbdkit 1.32, delay filter + memory",
}
for srv in ("async", "async-loop", "sync", "delay", "nbdkit"):
    io = med(srv, "iops")
    if (srv, "copy") in data:
        cp = med(srv, "copy")
        copy = "%.0f | %.2f" % (cp, cp / ceiling)
    else:
        copy = "- | -"
    print("| %s | %.0f | %.2f | %s | %.0f |"
          % (names[srv], io, io / ceiling, copy, med(srv, "threads")))
PY
cat "$report"
if [ "$write_results" -eq 1 ]; then
  write_section "Requests in flight against a slow backend" "$report"
fi
