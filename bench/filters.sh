#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/filters.sh: the same filter stacks on our server (our filters)
# and on Debian's nbdkit (its own filters), side by side, over the
# memory plugin and over the file plugin (a file in /dev/shm).
#
# Stacks: plain (no filter); offset, truncate, nozero and blocksize set
# so that they have nothing to do (their cost is pure overhead); cow;
# cache; partition (file only: the memory plugin has no partition
# table to find); and a stack of three (cow, blocksize, partition over
# file; cow, blocksize, offset over memory).  In each slot a fresh
# server runs: nbdcopy of a source file into the export (copy-in), fio
# (ioengine=nbd) 4 KiB random read and random write at QD32 on the
# data just copied in, then nbdcopy of the export to null: (copy-out).
# Slots rotate between the two servers from round to round.  Prints a
# markdown report: per plugin, for each stack and workload the median
# of each server and ours ÷ nbdkit, and for ours the stack's share of
# the plain plugin's figure; --write-results also puts it in
# bench/RESULTS.md as the section "## Filters" (other sections kept).
#
#   bench/filters.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--quick] [--build DIR] [--write-results]
#
# Defaults: 3 rounds, 3 s per fio run, exports of 512 MiB.  --quick: 1
# round of 1 s runs over memory only, of plain, offset and cow, random
# read and copy-out only (a smoke test).  --build: our built tree
# (default $BENCH_BUILD or /tmp/build-bench).  Needs fio with its nbd
# engine, nbdcopy, nbdinfo, sfdisk, python3 and Debian's /usr/bin/nbdkit
# (exit 77 without fio or Debian's nbdkit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=3 size_mib=512 quick=0 write_results=0
build="${BENCH_BUILD:-/tmp/build-bench}"
cmdline="bench/filters.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
[ "$quick" -eq 1 ] && rounds=1 runtime=1 size_mib=128
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
[ -x /usr/bin/nbdkit ] || { echo "$0: Debian's nbdkit not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
for c in nbdcopy nbdinfo sfdisk python3; do
  command -v "$c" >/dev/null || die "$c not found"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-filters.XXXXXX")"
shm="$(mktemp -d /dev/shm/bench-filters.XXXXXX)"
pids=() srv_pid=""
cleanup ()
{
  local status=$? p
  set +e
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work" "$shm"
  exit $status
}
trap_cleanup

size=$(( size_mib * 1024 * 1024 ))
# The source of copy-in: random bytes (nothing for a filter to skip).
head -c "$size" /dev/urandom > "$shm/source.img"
# The file plugin's disk: 1 MiB more than the export, with an MBR
# whose one partition starts at 1 MiB, so that partition=1, offset=1M
# and the plain file all serve $size bytes... except plain, which
# serves the whole file.
disk_size=$(( size + 1024 * 1024 ))

# The stacks: name, then "memory" or "file" args after the filters.
declare -A stack_filters=(
  [plain]=""
  [offset]="--filter=offset"
  [truncate]="--filter=truncate"
  [nozero]="--filter=nozero"
  [blocksize]="--filter=blocksize"
  [cow]="--filter=cow"
  [cache]="--filter=cache"
  [partition]="--filter=partition"
  [stack3]="--filter=cow --filter=blocksize --filter=SHAPE"
)
# Parameters that leave the filter nothing to do.
declare -A stack_params=(
  [offset]="offset=1M"
  [truncate]="truncate=SIZE"
  [blocksize]="minblock=512 maxdata=64M"
  [partition]="partition=1"
)
if [ "$quick" -eq 1 ]; then
  plugins=(memory)
  stacks=(plain offset cow)
  workloads=(randread-4k copy-out)
else
  plugins=(memory file)
  stacks=(plain offset truncate nozero blocksize cow cache partition stack3)
  workloads=(copy-in randread-4k randwrite-4k copy-out)
fi
servers=(ours nbdkit)

# The file plugin's disk, made fresh for each slot (writes land in it).
make_disk ()
{
  rm -f "$shm/disk.img"
  truncate -s "$disk_size" "$shm/disk.img"
  echo 'start=2048, type=83' | sfdisk -q "$shm/disk.img" >/dev/null
}

# start_server SERVER PLUGIN STACK: sets srv_pid and srv_uri, or returns
# 1 if the stack does not apply to the plugin.
start_server ()
{
  local name="$1" plugin="$2" stack="$3" bin=/usr/bin/nbdkit i
  local sock="$work/sock" pidfile="$work/pid" log="$work/server.log"
  local filters params plugin_args
  [ "$name" = ours ] && bin="$build/nbdkit"
  filters="${stack_filters[$stack]}"
  params="${stack_params[$stack]:-}"
  if [ "$plugin" = memory ]; then
    [ "$stack" = partition ] && return 1
    filters="${filters/SHAPE/offset}"
    [ "$stack" = stack3 ] && params="offset=1M"
    plugin_args=(memory "$(( size + 1024 * 1024 ))")
    params="${params/SIZE/$(( size + 1024 * 1024 ))}"
  else
    filters="${filters/SHAPE/partition}"
    [ "$stack" = stack3 ] && params="partition=1"
    make_disk
    plugin_args=(file "$shm/disk.img")
    params="${params/SIZE/$disk_size}"
  fi
  rm -f "$sock" "$pidfile"
  # shellcheck disable=SC2086
  "$bin" -f -U "$sock" -P "$pidfile" $filters "${plugin_args[@]}" $params \
    > "$log" 2>&1 &
  pids+=("$!")
  srv_uri="nbd+unix:///?socket=$sock"
  for (( i = 0; i < 200; i++ )); do
    [ -s "$pidfile" ] && break
    sleep 0.1
  done
  srv_pid="$(cat "$pidfile" 2>/dev/null)" ||
    die "$name $plugin $stack: no pid file: $(tail -3 "$log")"
  timeout 10 nbdinfo --size "$srv_uri" > /dev/null ||
    die "$name $plugin $stack: not serving: $(tail -3 "$log")"
  echo "$name $plugin $stack: $bin $filters ${plugin_args[*]} $params" \
    >> "$work/commands"
}

stop_server ()
{
  kill_pid "$srv_pid"
  srv_pid=""
}

# measure SERVER PLUGIN STACK WORKLOAD ROUND: appends one line
# "plugin stack workload server round value unit" to $work/data.
measure ()
{
  local name="$1" plugin="$2" stack="$3" wl="$4" rnd="$5"
  local out="$work/run.json" t0 t1
  case "$wl" in
    copy-in|copy-out)
      local what=("$shm/source.img" "$srv_uri")
      [ "$wl" = copy-out ] && what=("$srv_uri" null:)
      t0="$(date +%s.%N)"
      bounded $(( size_mib / 10 + 120 )) "$out.err" nbdcopy "${what[@]}" ||
        die "nbdcopy $wl failed: $(tail -3 "$out.err")"
      t1="$(date +%s.%N)"
      python3 -c "print('$plugin $stack $wl $name $rnd',
                        round($size_mib / ($t1 - $t0), 1), 'MiB/s')" \
        >> "$work/data" ;;
    randread-4k|randwrite-4k)
      bounded $(( runtime + 60 )) "$out.err" \
        fio --name=bench --ioengine=nbd --uri="$srv_uri" \
          --rw="${wl%-4k}" --bs=4k --iodepth=32 --numjobs=1 \
          --size="$size" --runtime="$runtime" --time_based --norandommap \
          --randrepeat=0 --output-format=json --output="$out" ||
        die "fio $wl failed: $(tail -3 "$out.err")"
      python3 - "$out" "$plugin $stack $wl $name $rnd" >> "$work/data" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
iops = j["read"]["iops"] + j["write"]["iops"]
print(sys.argv[2], round(iops), "IOPS")
PY
      ;;
  esac
}

note "rounds $rounds, runtime $runtime s, exports of $size_mib MiB"
for (( rnd = 1; rnd <= rounds; rnd++ )); do
  for plugin in "${plugins[@]}"; do
    for stack in "${stacks[@]}"; do
      # Rotate which server goes first.
      order=("${servers[@]}")
      (( rnd % 2 == 0 )) && order=("${servers[1]}" "${servers[0]}")
      for name in "${order[@]}"; do
        start_server "$name" "$plugin" "$stack" || continue
        for wl in "${workloads[@]}"; do
          measure "$name" "$plugin" "$stack" "$wl" "$rnd"
        done
        stop_server
        note "round $rnd: $plugin $stack $name done"
      done
    done
  done
done

report="$work/report.md"
python3 - "$work/data" "$cmdline" "$(nproc)" "$(ours_version)" \
  "$(/usr/bin/nbdkit --version | head -1)" "$(fio --version)" \
  "$rounds" "$runtime" "$size_mib" > "$report" <<'PY'
import statistics, sys
from collections import defaultdict
data, cmdline, ncpu, ours, ref, fio, rounds, runtime, size = sys.argv[1:]
vals = defaultdict(list)
units = {}
order_stacks, order_wl, plugins = [], [], []
for line in open(data):
    plugin, stack, wl, server, rnd, value, unit = line.split()
    vals[(plugin, stack, wl, server)].append(float(value))
    units[wl] = unit
    for lst, x in ((plugins, plugin), (order_stacks, stack), (order_wl, wl)):
        if x not in lst:
            lst.append(x)
med = {k: statistics.median(v) for k, v in vals.items()}
names = {"randread-4k": "4K randread QD32", "randwrite-4k": "4K randwrite QD32",
         "copy-in": "nbdcopy in", "copy-out": "nbdcopy out"}
print("## Filters")
print()
print("`%s` on %s CPUs; ours: %s; nbdkit: %s; %s.  %s rounds, %s s per fio"
      " run, exports of %s MiB; medians of the rounds, both servers run"
      " in turn in each round." % (cmdline, ncpu, ours.strip(), ref, fio,
                                  rounds, runtime, size))
for plugin in plugins:
    print()
    print("### Over the %s plugin" % plugin)
    print()
    print("| stack | workload | ours | nbdkit | ours ÷ nbdkit | ours ÷ ours plain |")
    print("|---|---|---|---|---|---|")
    for stack in order_stacks:
        for wl in order_wl:
            o = med.get((plugin, stack, wl, "ours"))
            r = med.get((plugin, stack, wl, "nbdkit"))
            if o is None or r is None:
                continue
            p = med.get((plugin, "plain", wl, "ours"))
            fmt = "%.0f" if units[wl] == "IOPS" else "%.1f"
            print("| %s | %s | %s %s | %s %s | %.2f | %s |" % (
                stack, names.get(wl, wl), fmt % o, units[wl], fmt % r,
                units[wl], o / r if r else float("nan"),
                "%.2f" % (o / p) if p else "–"))
PY
cat "$report"
echo
echo "Commands:"
sort -u "$work/commands" | sed 's/^/    /'
[ "$write_results" -eq 1 ] && write_section "Filters" "$report"
exit 0
