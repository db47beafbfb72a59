#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/rbd.sh: the rbd plugin against its ceiling and its peer, on one
# RBD image of a private one-node Ceph cluster (tests/ceph-cluster.sh:
# memstore OSD, so the cluster costs CPU, not disk).
#
# For each workload: "rbd bench" (librbd with no NBD in between: the
# ceiling), our server's rbd plugin on its asynchronous path (the
# default, nbdkit-async(3)) and on its synchronous one
# (-D nbdkit.async=0), and qemu-nbd serving rbd:POOL/IMAGE (Debian's
# qemu-block-extra), the last three driven by fio (ioengine=nbd) over a
# Unix socket.  Workloads: 4 KiB random read and
# write at QD32, 1 MiB sequential read and write at QD8.  The image
# (256 MiB by default) is filled first so reads hit data.  Rounds are
# interleaved (the order of the peers rotates); each figure is the
# median over the rounds.  Prints a markdown table on stdout, with each
# peer as a fraction of the ceiling.
#
#   bench/rbd.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--workloads W,...] [--build DIR] [--write-results]
#
# --workloads: a comma-separated subset of randread-4k, randwrite-4k,
# read-1m, write-1m (default: all four).
# --build: our built tree (default: this source tree, built in place).
# --write-results puts the table in bench/RESULTS.md as "## Ceph RBD".
# Needs the ceph packages, fio with its nbd engine, and qemu-nbd with
# the rbd driver (left out if missing); exits 77 without ceph or fio.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=5 size_mib=256 write_results=0 only=
build="$srcdir"
cmdline="bench/rbd.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --workloads) only="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
command -v ceph-osd >/dev/null || { echo "$0: ceph not installed" >&2; exit 77; }
plugin="$build/plugins/rbd/.libs/nbdkit-rbd-plugin.so"
[ -f "$plugin" ] || die "$plugin not built"

tmp="$(mktemp -d /tmp/bench-rbd.XXXXXX)"
pids=()
srv_pid=
cleanup ()
{
  local p
  for p in "${pids[@]}" $srv_pid; do kill_pid "$p"; done
  "$srcdir/tests/ceph-cluster.sh" stop "$tmp/ceph" 2>/dev/null || :
  rm -rf "$tmp"
}
trap_cleanup

note "starting the Ceph cluster"
"$srcdir/tests/ceph-cluster.sh" start "$tmp/ceph" --owner $$ >&2 ||
  die "the Ceph cluster did not start"
. "$tmp/ceph/env"
img=bench
rbd create --size "${size_mib}M" "$RBD_POOL/$img"
note "filling $img ($size_mib MiB)"
timeout 300 rbd bench --io-type write --io-pattern seq --io-size 4M \
  --io-threads 4 --io-total "${size_mib}M" "$RBD_POOL/$img" > /dev/null

qemu=0
if command -v qemu-nbd >/dev/null &&
   qemu-img info "rbd:$RBD_POOL/$img:conf=$CEPH_CONF" >/dev/null 2>&1; then
  qemu=1
fi

# workload -> "fio rw, block size, queue depth, rbd bench type, pattern"
workloads=(randread-4k randwrite-4k read-1m write-1m)
if [ -n "$only" ]; then
  IFS=, read -r -a workloads <<< "$only"
  for w in "${workloads[@]}"; do
    case "$w" in
      randread-4k|randwrite-4k|read-1m|write-1m) ;;
      *) die "--workloads: unknown workload $w" ;;
    esac
  done
fi
declare -A wl=(
  [randread-4k]="randread 4k 32 read rand"
  [randwrite-4k]="randwrite 4k 32 write rand"
  [read-1m]="read 1m 8 read seq"
  [write-1m]="write 1m 8 write seq"
)

# rbd bench runs for a total, not a time: aim at about RUNTIME seconds,
# as fio runs, from the rate of a first untimed run (4000 IOPS for 4 KiB
# and 200 MiB/s for 1 MiB to start with), so that the ceiling is not a
# burst of a fraction of a second against fio's steady state.
declare -A rate=()
rbd_bench_once ()
{
  local w=$1 ops=$2 rw bs qd type pattern out
  read -r rw bs qd type pattern <<<"${wl[$w]}"
  out="$tmp/rbd-bench.out"
  bounded $(( runtime * 10 + 60 )) "$out" \
    rbd bench --io-type "$type" --io-pattern "$pattern" --io-size "${bs^^}" \
      --io-threads "$qd" --io-total "$(( ops * ${bs%[km]} ))$(tr km KM <<< "${bs: -1}")" \
      "$RBD_POOL/$img" ||
    die "rbd bench failed: $(tail -3 "$out")"
  # "elapsed: 3   ops: 16000   ops/sec: 5312.8   bytes/sec: ..."
  awk '/^elapsed:/ { print $6 }' "$out"
}
# Sets bench_v (not printed: rate[] must survive the call).
run_rbd_bench ()
{
  local w=$1 v
  if [ -z "${rate[$w]:-}" ]; then
    case "$w" in *-4k) v=4000 ;; *) v=200 ;; esac
    v=$(rbd_bench_once "$w" $(( v * runtime )))
    rate[$w]=${v%.*}
  fi
  bench_v=$(rbd_bench_once "$w" $(( rate[$w] * runtime )))
  rate[$w]=${bench_v%.*}
}

run_fio ()
{
  local uri=$1 rw bs qd type pattern out
  read -r rw bs qd type pattern <<<"${wl[$2]}"
  out="$tmp/fio.json"
  rm -f "$out"
  bounded $(( runtime + 60 )) "$tmp/fio.log" \
    fio --name=bench --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
      --iodepth="$qd" --numjobs=1 --runtime="$runtime" --time_based \
      --norandommap --randrepeat=0 --size="${size_mib}M" \
      --output-format=json --output="$out" ||
    die "fio failed ($2 on $uri): $(tail -3 "$tmp/fio.log")"
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(j["read"]["iops"] + j["write"]["iops"])' "$out"
}

# start_ours [SERVER FLAGS...]
start_ours ()
{
  rm -f "$tmp/sock" "$tmp/pid"
  "$build/nbdkit" "$@" -f -U "$tmp/sock" -P "$tmp/pid" "$plugin" \
    conf="$CEPH_CONF" id="$CEPH_ID" keyring="$CEPH_KEYRING" image="$img" \
    2> "$tmp/ours.log" &
  srv_pid=$!
  for _ in $(seq 200); do [ -s "$tmp/pid" ] && break; sleep 0.1; done
  [ -s "$tmp/pid" ] || die "our server did not start: $(cat "$tmp/ours.log")"
}

start_qemu ()
{
  rm -f "$tmp/sock"
  qemu-nbd -f raw -t -x "" --cache=writeback --socket="$tmp/sock" \
    "rbd:$RBD_POOL/$img:id=$CEPH_ID:conf=$CEPH_CONF:keyring=$CEPH_KEYRING" \
    2> "$tmp/qemu.log" &
  srv_pid=$!
  for _ in $(seq 200); do [ -S "$tmp/sock" ] && break; sleep 0.1; done
  [ -S "$tmp/sock" ] || die "qemu-nbd did not start: $(cat "$tmp/qemu.log")"
}

peers=(rbd-bench ours ours-sync)
[ "$qemu" -eq 1 ] && peers+=(qemu-nbd)
: > "$tmp/results"
for (( r = 0; r < rounds; r++ )); do
  for (( i = 0; i < ${#peers[@]}; i++ )); do
    p=${peers[$(( (i + r) % ${#peers[@]} ))]}
    note "round $((r + 1)): $p"
    case "$p" in
      ours) start_ours ;;
      ours-sync) start_ours -D nbdkit.async=0 ;;
      qemu-nbd) start_qemu ;;
    esac
    for w in "${workloads[@]}"; do
      if [ "$p" = rbd-bench ]; then run_rbd_bench "$w"; v=$bench_v
      else v=$(run_fio "nbd+unix:///?socket=$tmp/sock" "$w"); fi
      echo "$p $w $v" >> "$tmp/results"
    done
    if [ -n "$srv_pid" ]; then kill_pid "$srv_pid"; wait "$srv_pid" 2>/dev/null || :; srv_pid=; fi
  done
done

report="$tmp/report.md"
python3 - "$tmp/results" "$rounds" "$runtime" "$size_mib" "$cmdline" \
  "$(rbd --version | awk '{print $3}')" "$(qemu-nbd --version | head -1)" \
  > "$report" <<'PY'
import statistics, sys
path, rounds, runtime, size, cmd, ceph, qemu = sys.argv[1:]
res = {}
for line in open(path):
    p, w, v = line.split()
    res.setdefault((p, w), []).append(float(v))
peers = [p for p in ("rbd-bench", "ours", "ours-sync", "qemu-nbd")
         if any(k[0] == p for k in res)]
wls = [w for w in ("randread-4k", "randwrite-4k", "read-1m", "write-1m")
       if ("rbd-bench", w) in res]
print("## Ceph RBD\n")
print("`%s`: %s rounds, %s s per run, a %s MiB image on a one-node"
      " memstore cluster (ceph %s), %s; the machine was shared."
      % (cmd.strip(), rounds, runtime, size, ceph, qemu))
print("IOPS, median over the rounds; in brackets, as a fraction of"
      " `rbd bench` (librbd alone, the ceiling).  ours is the rbd plugin"
      " on its asynchronous path, ours-sync the same with"
      " `-D nbdkit.async=0`.  Ours and qemu-nbd are driven by fio"
      " (ioengine=nbd, one connection) over a Unix socket.\n")
print("| workload | " + " | ".join(peers) + " |")
print("|---|" + "---|" * len(peers))
for w in wls:
    ceil = statistics.median(res[("rbd-bench", w)])
    cells = []
    for p in peers:
        m = statistics.median(res[(p, w)])
        cells.append("%.0f" % m if p == "rbd-bench"
                     else "%.0f (%.2f)" % (m, m / ceil))
    print("| %s | %s |" % (w, " | ".join(cells)))
PY
cat "$report"
[ "$write_results" -eq 1 ] && write_section "Ceph RBD" "$report"
exit 0
