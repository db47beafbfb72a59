#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/perl-lua.sh: the perl and lua plugin hosts beside Debian's
# nbdkit 1.32 running the same script, in one run.
#
# Each host serves its RAM disk example (plugins/perl/examples/ramdisk.pl,
# plugins/lua/examples/ramdisk.lua) of --size MiB, filled once by
# nbdcopy from a file of random bytes; in each slot a fresh server runs
# fio (ioengine=nbd) 4 KiB random read at QD32 for --runtime seconds,
# then nbdcopy of the export to null:.  The servers alternate their
# order from round to round.  Both hosts serialize all requests, so
# these figures are the cost of the interpreter and the host around it
# per request.
#
# Besides the rates, the server's CPU time (user + system, from
# /proc/PID/stat) per request and per MiB copied: on a shared machine
# it moves less than the rates do.  Prints a markdown table of the
# medians, ours ÷ nbdkit on every row (for CPU time, below 1 is better).
#
#   bench/perl-lua.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--build DIR]
#
# Defaults: 3 rounds, 3 s per fio run, 256 MiB disks (CPU time comes in
# ticks of 10 ms: smaller disks copy in too few of them), our build in this
# source tree.  Needs fio with its nbd engine, nbdcopy and Debian's
# /usr/bin/nbdkit (exit 77 without them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=3 size_mib=256 build="$srcdir"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"
for c in fio nbdcopy /usr/bin/nbdkit; do
  command -v "$c" >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
[ -x "$build/nbdkit" ] || die "$build/nbdkit: not built"

work="$(mktemp -d)"
pids=()
srv_pid=""
cleanup ()
{
  local p
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work"
}
trap_cleanup

size=$(( size_mib * 1024 * 1024 ))
head -c "$size" /dev/urandom > "$work/fill"

# start_server NAME LANG: the server NAME (ours or nbdkit) serving the
# LANG example on a Unix socket, filled with $work/fill.
start_server ()
{
  local name="$1" lang="$2" bin ext
  bin="$build/nbdkit"
  [ "$name" = nbdkit ] && bin=/usr/bin/nbdkit
  case "$lang" in perl) ext=pl ;; lua) ext=lua ;; esac
  rm -f "$work/sock"
  "$bin" -f -U "$work/sock" "$lang" \
    "$srcdir/plugins/$lang/examples/ramdisk.$ext" size="$size" \
    2> "$work/server.err" &
  srv_pid=$!
  srv_uri="nbd+unix:///?socket=$work/sock"
  for (( i = 0; i < 100; i++ )); do
    [ -S "$work/sock" ] && break
    sleep 0.1
  done
  [ -S "$work/sock" ] || die "$name $lang did not start: $(cat "$work/server.err")"
  bounded 300 "$work/fill.err" nbdcopy "$work/fill" "$srv_uri" ||
    die "filling $name $lang failed: $(tail -3 "$work/fill.err")"
}

stop_server () { kill_pid "$srv_pid"; srv_pid=""; }

record () { echo "$*" | tee -a "$work/data" >&2; }

# Clock ticks per second, for cpu_ticks.
hz="$(getconf CLK_TCK)"

measure ()
{
  local name="$1" lang="$2" rnd="$3" t0 t1 c0 c1 iops
  c0="$(cpu_ticks "$srv_pid")"
  bounded $(( runtime + 120 )) "$work/fio.err" \
    fio --name=bench --ioengine=nbd --uri="$srv_uri" --numjobs=1 \
      --output-format=json --output="$work/run.json" --rw=randread \
      --bs=4k --iodepth=32 --size="$size" --runtime="$runtime" \
      --time_based --norandommap --randrepeat=0 ||
    die "fio failed: $(tail -3 "$work/fio.err")"
  c1="$(cpu_ticks "$srv_pid")"
  iops="$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print(round(j["iops"]), j["total_ios"])' "$work/run.json")"
  record "$lang randread-4k $name $rnd ${iops% *} IOPS"
  record "$lang randread-4k-cpu $name $rnd" \
    "$(python3 -c "print(round(($c1 - $c0) * 1e6 / $hz / ${iops#* }, 1))") us/req"
  c0="$(cpu_ticks "$srv_pid")"
  t0="$(date +%s.%N)"
  bounded 600 "$work/copy.err" nbdcopy "$srv_uri" null: ||
    die "nbdcopy failed: $(tail -3 "$work/copy.err")"
  t1="$(date +%s.%N)"
  c1="$(cpu_ticks "$srv_pid")"
  record "$lang copy-out $name $rnd" \
    "$(python3 -c "print(round($size_mib / ($t1 - $t0), 1))") MiB/s"
  record "$lang copy-out-cpu $name $rnd" \
    "$(python3 -c "print(round(($c1 - $c0) * 1000 / $hz / $size_mib, 2))") ms/MiB"
}

note "rounds $rounds, runtime $runtime s, disks of $size_mib MiB"
for (( rnd = 1; rnd <= rounds; rnd++ )); do
  order=(ours nbdkit)
  (( rnd % 2 == 0 )) && order=(nbdkit ours)
  for lang in perl lua; do
    for name in "${order[@]}"; do
      start_server "$name" "$lang"
      measure "$name" "$lang" "$rnd"
      stop_server
    done
  done
done

python3 - "$work/data" "$rounds" "$runtime" "$size_mib" "$(nproc)" <<'PY'
import statistics, sys
from collections import defaultdict
data, rounds, runtime, size, ncpu = sys.argv[1:]
vals, units, order = defaultdict(list), {}, []
for line in open(data):
    lang, wl, server, rnd, value, unit = line.split()
    vals[(lang, wl, server)].append(float(value))
    units[(lang, wl)] = unit
    if (lang, wl) not in order:
        order.append((lang, wl))
names = {"randread-4k": "4K randread QD32", "copy-out": "nbdcopy to null:",
         "randread-4k-cpu": "server CPU per 4K read",
         "copy-out-cpu": "server CPU per MiB copied"}
print("## Perl and Lua plugin hosts\n")
print(f"bench/perl-lua.sh: {rounds} rounds, {runtime} s fio runs, "
      f"{size} MiB RAM disk examples, {ncpu} CPUs; medians.\n")
print("| host | workload | ours | nbdkit 1.32 | ours ÷ nbdkit |")
print("|---|---|---:|---:|---:|")
for lang, wl in order:
    o = statistics.median(vals[(lang, wl, "ours")])
    r = statistics.median(vals[(lang, wl, "nbdkit")])
    u = units[(lang, wl)]
    print(f"| {lang} | {names[wl]} | {o:g} {u} | {r:g} {u} | {o / r:.2f} |")
PY
