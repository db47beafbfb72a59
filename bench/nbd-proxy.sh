#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/nbd-proxy.sh: what putting an nbd plugin in front of a server
# costs.  One upstream, our server's memory plugin (--size MiB,
# pre-written), is reached three ways:
#
#   direct   the client talks to the upstream itself;
#   ours     our nbd plugin in front of it (nbd socket=UPSTREAM);
#   nbdkit   Debian's nbdkit 1.32 running the same nbd command;
#   ours4    ours with connections=4 (four upstream connections per
#            client, which nbdkit 1.32 does not have);
#   sync     ours with -D nbdkit.async=0: the synchronous path (a worker
#            waits for each reply), which was the only one before the
#            plugin completed requests asynchronously (ours, ours4);
#   qemu     qemu-nbd serving the same upstream through its own NBD
#            client (-f raw 'nbd+unix:///?socket=UPSTREAM').
#
# Workloads: fio (ioengine=nbd) 4 KiB random read and 4 KiB random
# write at QD32, 1 MiB sequential read at QD8, then nbdcopy of a --size
# MiB file in /dev/shm into the export (copy-in) and of the export to
# null: (copy-out).  Each round runs every path, in an order rotated
# from round to round; the report gives medians, ours ÷ nbdkit and
# ours ÷ direct on every row (the brief: ours ≥ nbdkit, and ours ÷
# direct ≥ 0.70 for the IOPS rows), and a second table with the
# synchronous path and qemu-nbd: ours ÷ sync, ours ÷ qemu-nbd (issue
# 30's targets at QD32: ours ÷ direct at least twice the synchronous
# path's, ours at least twice nbdkit's, ahead of qemu-nbd).  For the fio rows it also gives the
# CPU time (user + system) of the server the client talks to, per I/O:
# the proxy's own cost, which a loaded machine disturbs less than the
# rates.
#
#   bench/nbd-proxy.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--quick] [--build DIR]
#
# Defaults: 3 rounds, 3 s per fio run, 256 MiB.  --quick: 1 round of
# 1 s runs of 64 MiB.  --build: our built tree (default: the tree this
# script is in).  Needs fio with its nbd engine, nbdcopy, Debian's
# /usr/bin/nbdkit with its nbd plugin (exit 77 without fio or nbdkit)
# and qemu-nbd (qemu-utils; without it the qemu column is left out).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=3 size_mib=256
build="$srcdir"
cmdline="bench/nbd-proxy.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --quick) rounds=1 runtime=1 size_mib=64; shift ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
[ -e "$build/plugins/nbd/.libs/nbdkit-nbd-plugin.so" ] ||
  die "our nbd plugin is not built in $build"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
[ -x /usr/bin/nbdkit ] || { echo "$0: Debian's nbdkit not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
command -v nbdcopy >/dev/null || die "nbdcopy not found"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-nbd-proxy.XXXXXX")"
shm="$(mktemp -d /dev/shm/bench-nbd-proxy.XXXXXX)"
pids=() srv_pids=()
declare -A pid_of
cleanup ()
{
  local status=$? p
  set +e
  for p in "${pids[@]}" "${srv_pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work" "$shm"
  exit $status
}
trap_cleanup

# start NAME CMD...: a server on $work/NAME.sock; sets NAME_uri.
start ()
{
  local name="$1"
  shift
  rm -f "$work/$name.sock" "$work/$name.pid"
  "$@" -f -U "$work/$name.sock" -P "$work/$name.pid" "${server_args[@]}" \
    >"$work/$name.log" 2>&1 &
  srv_pids+=($!)
  pid_of[$name]=$!
  for (( i = 0; i < 100; i++ )); do
    [ -s "$work/$name.pid" ] && break
    sleep 0.1
  done
  [ -s "$work/$name.pid" ] || die "$name did not start: $(tail -3 "$work/$name.log")"
  printf -v "${name}_uri" 'nbd+unix:///?socket=%s' "$work/$name.sock"
}

server_args=(memory "${size_mib}M")
start upstream "$build/nbdkit"
bounded 300 "$work/prewrite.err" \
  fio --name=prewrite --ioengine=nbd --uri="$upstream_uri" \
    --rw=write --bs=1M --iodepth=8 --output="$work/prewrite.json" ||
  die "pre-writing the upstream failed: $(tail -3 "$work/prewrite.err")"
direct_uri="$upstream_uri"
pid_of[direct]=${pid_of[upstream]}
server_args=(nbd socket="$work/upstream.sock")
start ours "$build/nbdkit"
start nbdkit /usr/bin/nbdkit
server_args+=(connections=4)
start ours4 "$build/nbdkit"
server_args=(-D nbdkit.async=0 nbd socket="$work/upstream.sock")
start sync "$build/nbdkit"
paths=(direct ours nbdkit ours4 sync)
if command -v qemu-nbd >/dev/null; then
  rm -f "$work/qemu.sock"
  qemu-nbd -f raw -t --shared=0 -k "$work/qemu.sock" \
    "$upstream_uri" > "$work/qemu.log" 2>&1 &
  srv_pids+=($!)
  pid_of[qemu]=$!
  for (( i = 0; i < 100; i++ )); do
    [ -S "$work/qemu.sock" ] && break
    sleep 0.1
  done
  [ -S "$work/qemu.sock" ] || die "qemu-nbd did not start: $(tail -3 "$work/qemu.log")"
  qemu_uri="nbd+unix:///?socket=$work/qemu.sock"
  paths+=(qemu)
else
  note "qemu-nbd not found: no qemu column"
fi
head -c "$(( size_mib * 1024 * 1024 ))" /dev/urandom > "$shm/src"

declare -A wl_rw=([randread-4k]=randread [randwrite-4k]=randwrite
                  [seqread-1m]=read)
declare -A wl_bs=([randread-4k]=4k [randwrite-4k]=4k [seqread-1m]=1M)
declare -A wl_qd=([randread-4k]=32 [randwrite-4k]=32 [seqread-1m]=8)
workloads=(randread-4k randwrite-4k seqread-1m copy-in copy-out)
: > "$work/data"

# measure PATH WORKLOAD ROUND: append "workload path round value unit".
measure ()
{
  local path="$1" wl="$2" round="$3" urivar="${1}_uri"
  local uri="${!urivar}" out="$work/$path-$wl-$round.json" t0 t1
  case "$wl" in
    copy-in|copy-out)
      t0="$(date +%s%N)"
      if [ "$wl" = copy-in ]; then
        bounded 300 "$out.err" nbdcopy "$shm/src" "$uri" ||
          die "nbdcopy into $path failed: $(tail -3 "$out.err")"
      else
        bounded 300 "$out.err" nbdcopy "$uri" null: ||
          die "nbdcopy out of $path failed: $(tail -3 "$out.err")"
      fi
      t1="$(date +%s%N)"
      echo "$wl $path $round" \
        "$(( size_mib * 1000000000 / (t1 - t0) ))" MiB/s >> "$work/data"
      ;;
    *)
      # The CPU time of the server the client talks to (the proxy, or
      # the upstream on the direct path), per I/O: less at the mercy of
      # a loaded machine than the rates.
      t0="$(cpu_ticks "${pid_of[$path]}")"
      bounded $(( runtime + 60 )) "$out.err" \
        fio --name=bench --ioengine=nbd --uri="$uri" --rw="${wl_rw[$wl]}" \
          --bs="${wl_bs[$wl]}" --iodepth="${wl_qd[$wl]}" \
          --runtime="$runtime" --time_based --norandommap --randrepeat=0 \
          --output-format=json --output="$out" ||
        die "fio failed ($wl on $path): $(tail -3 "$out.err")"
      t1="$(cpu_ticks "${pid_of[$path]}")"
      python3 - "$out" "$wl" "$path" "$round" $(( t1 - t0 )) \
        "$(getconf CLK_TCK)" >> "$work/data" <<'PY'
import json, sys
out, wl, path, rnd, ticks, hz = sys.argv[1:]
job = json.load(open(out))["jobs"][0]
d = job["write"] if "write" in wl else job["read"]
value, unit = (d["bw_bytes"] / 2**20, "MiB/s") if "seq" in wl \
              else (d["iops"], "IOPS")
print(wl, path, rnd, "%.0f" % value, unit)
if d["total_ios"]:
    print(wl, path, rnd, "%.2f" % (int(ticks) * 1e6 / int(hz) / d["total_ios"]),
          "server-CPU-us/IO")
PY
      ;;
  esac
  note "$(tail -1 "$work/data")"
}

interleave measure "${paths[@]}"

python3 - "$work/data" <<PY
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    wl, path, rnd, value, unit = line.split()
    rows.setdefault((wl, unit), {}).setdefault(path, []).append(float(value))
print("## nbd plugin: proxy cost")
print()
print("Command: $cmdline; $rounds round(s), $runtime s per fio run,")
print("upstream: our memory plugin, $size_mib MiB, pre-written, on a Unix")
print("socket; each proxy: nbd socket=UPSTREAM on its own Unix socket.")
print("Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs.")
print()
print("| workload | direct | ours | nbdkit 1.32 | ours ÷ nbdkit | ours ÷ direct | ours, connections=4 | its ÷ direct |")
print("|---|---|---|---|---|---|---|---|")
order = ["randread-4k", "randwrite-4k", "seqread-1m", "copy-in", "copy-out"]
units = ["IOPS", "MiB/s", "server-CPU-us/IO"]
for (wl, unit), d in sorted(rows.items(), key=lambda x: (units.index(x[0][1]) // 2, order.index(x[0][0]))):
    m = {p: statistics.median(v) for p, v in d.items()}
    fmt = "%.2f" if unit.startswith("server") else "%.0f"
    print(("| %s (%s) | " + fmt + " | " + fmt + " | " + fmt +
           " | %.2f | %.2f | " + fmt + " | %.2f |") % (
        wl, unit, m["direct"], m["ours"], m["nbdkit"],
        m["ours"] / m["nbdkit"], m["ours"] / m["direct"],
        m["ours4"], m["ours4"] / m["direct"]))
print()
print("The asynchronous path (ours) against the synchronous one (sync, -D")
print("nbdkit.async=0) and qemu-nbd serving the same upstream (qemu):")
print()
print("| workload | direct | ours | sync | qemu-nbd | ours ÷ direct | sync ÷ direct | ours ÷ sync | ours ÷ nbdkit | ours ÷ qemu-nbd |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (wl, unit), d in sorted(rows.items(), key=lambda x: (units.index(x[0][1]) // 2, order.index(x[0][0]))):
    m = {p: statistics.median(v) for p, v in d.items()}
    fmt = "%.2f" if unit.startswith("server") else "%.0f"
    q = m.get("qemu")
    print(("| %s (%s) | " + fmt + " | " + fmt + " | " + fmt + " | %s | %.2f | %.2f | %.2f | %.2f | %s |") % (
        wl, unit, m["direct"], m["ours"], m["sync"],
        fmt % q if q is not None else "-",
        m["ours"] / m["direct"], m["sync"] / m["direct"],
        m["ours"] / m["sync"], m["ours"] / m["nbdkit"],
        "%.2f" % (m["ours"] / q) if q else "-"))
PY
