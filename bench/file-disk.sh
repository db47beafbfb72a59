#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/file-disk.sh: the file plugin serving a file on a real disk,
# beside qemu-nbd and Debian's nbdkit serving the same file, in one run.
# One file of --size MiB of random bytes in --dir (which must be on a
# disk, not tmpfs) is served by:
#
#   ours            our file plugin as it is by default (worker
#                   threads, the page cache);
#   ours-nocache    ours with cache=none (threads, pages dropped);
#   ours-direct-thr ours with direct=true aio=threads (O_DIRECT from
#                   worker threads);
#   ours-direct     ours with direct=true aio=io_uring (O_DIRECT
#                   through io_uring);
#   qemu-nbd        qemu-nbd --aio=io_uring --cache=none -f raw;
#   nbdkit          Debian's nbdkit 1.32, file plugin, cache=none.
#
# Workloads: fio (ioengine=nbd) 4 KiB random read at QD32, 4 KiB random
# write at QD32, 1 MiB sequential read at QD8, --runtime seconds each.
# Before each run the file is written back and the page cache dropped
# (sync; echo 3 > /proc/sys/vm/drop_caches, as root; else the file's
# pages only, with posix_fadvise), so reads start from the disk.  Each
# round runs every server on every workload, in an order rotated from
# round to round; the report gives medians and each of ours ÷ qemu-nbd.
#
#   bench/file-disk.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--dir DIR] [--build DIR]
#
# Defaults: 3 rounds, 3 s per fio run, a 1024 MiB file in /var/tmp.
# --build: our built tree (default: the tree this script is in).
# Needs fio with its nbd engine, qemu-nbd and Debian's /usr/bin/nbdkit
# (exit 77 without fio, qemu-nbd or nbdkit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=3 size_mib=1024 dir=/var/tmp
build="$srcdir"
cmdline="bench/file-disk.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
for c in fio qemu-nbd /usr/bin/nbdkit; do
  command -v "$c" >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
[ -d "$dir" ] || die "--dir $dir is not a directory"
[ "$(stat -f -c %T "$dir")" != tmpfs ] ||
  die "--dir $dir is on tmpfs: this bench needs a disk"
"$build/nbdkit" file --dump-plugin | grep -q '^file_io_uring=yes' ||
  die "our file plugin was built without liburing (aio=io_uring)"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-file-disk.XXXXXX")"
img="$(mktemp "$dir/bench-file-disk.XXXXXX")"
pids=() srv_pids=()
cleanup ()
{
  local status=$? p
  set +e
  for p in "${pids[@]}" "${srv_pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work" "$img"
  exit $status
}
trap_cleanup

note "making the $size_mib MiB file $img"
head -c "$(( size_mib * 1024 * 1024 ))" /dev/urandom > "$img"

# start NAME CMD...: a server of the file on $work/NAME.sock, started
# once for the whole run; sets NAME_uri.
start ()
{
  local name="$1" i
  shift
  "$@" >"$work/$name.log" 2>&1 &
  srv_pids+=($!)
  for (( i = 0; i < 100; i++ )); do
    [ -S "$work/$name.sock" ] && break
    sleep 0.1
  done
  [ -S "$work/$name.sock" ] ||
    die "$name did not start: $(tail -3 "$work/$name.log")"
  printf -v "${name//-/_}_uri" 'nbd+unix:///?socket=%s' "$work/$name.sock"
}

start ours "$build/nbdkit" -f -U "$work/ours.sock" file "$img"
start ours-nocache "$build/nbdkit" -f -U "$work/ours-nocache.sock" \
  file "$img" cache=none
start ours-direct-thr "$build/nbdkit" -f -U "$work/ours-direct-thr.sock" \
  file "$img" direct=true aio=threads
start ours-direct "$build/nbdkit" -f -U "$work/ours-direct.sock" \
  file "$img" direct=true aio=io_uring
start qemu-nbd qemu-nbd --aio=io_uring --cache=none -f raw -t -e 8 \
  -k "$work/qemu-nbd.sock" "$img"
start nbdkit /usr/bin/nbdkit -f -U "$work/nbdkit.sock" file "$img" \
  cache=none

# uncache: the file written back and out of the page cache.
uncache ()
{
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then
    echo 3 > /proc/sys/vm/drop_caches
  else
    python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$img"
  fi
}

declare -A wl_rw=([randread-4k]=randread [randwrite-4k]=randwrite
                  [seqread-1m]=read)
declare -A wl_bs=([randread-4k]=4k [randwrite-4k]=4k [seqread-1m]=1M)
declare -A wl_qd=([randread-4k]=32 [randwrite-4k]=32 [seqread-1m]=8)
workloads=(randread-4k randwrite-4k seqread-1m)
sides=(ours ours-nocache ours-direct-thr ours-direct qemu-nbd nbdkit)
: > "$work/data"

# measure SIDE WORKLOAD ROUND: append "workload side round value unit".
measure ()
{
  local side="$1" wl="$2" round="$3" urivar="${1//-/_}_uri"
  local out="$work/$side-$wl-$round.json"
  uncache
  bounded $(( runtime + 60 )) "$out.err" \
    fio --name=bench --ioengine=nbd --uri="${!urivar}" \
      --rw="${wl_rw[$wl]}" --bs="${wl_bs[$wl]}" --iodepth="${wl_qd[$wl]}" \
      --runtime="$runtime" --time_based --norandommap --randrepeat=0 \
      --output-format=json --output="$out" ||
    die "fio failed ($wl on $side): $(tail -3 "$out.err")"
  python3 - "$out" "$wl" "$side" "$round" >> "$work/data" <<'PY'
import json, sys
out, wl, side, rnd = sys.argv[1:]
job = json.load(open(out))["jobs"][0]
d = job["write"] if "write" in wl else job["read"]
value, unit = (d["bw_bytes"] / 2**20, "MiB/s") if "seq" in wl \
              else (d["iops"], "IOPS")
print(wl, side, rnd, "%.0f" % value, unit)
PY
  note "$(tail -1 "$work/data")"
}

interleave measure "${sides[@]}"

python3 - "$work/data" <<PY
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    wl, side, rnd, value, unit = line.split()
    rows.setdefault((wl, unit), {}).setdefault(side, []).append(float(value))
print("## file plugin on a disk")
print()
print("Command: $cmdline; $rounds round(s), $runtime s per fio run,")
print("a $size_mib MiB file on $(df --output=source,fstype "$img" | tail -1 | tr -s ' '),")
print("written back and dropped from the page cache before each run.")
print("Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs.")
print()
print("| workload | ours | ours cache=none | ours direct, threads | ours direct, io_uring | qemu-nbd io_uring | nbdkit 1.32 cache=none | ours ÷ qemu-nbd | nocache ÷ qemu-nbd | direct,thr ÷ qemu-nbd | direct,io_uring ÷ qemu-nbd |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
order = ["randread-4k", "randwrite-4k", "seqread-1m"]
for (wl, unit), d in sorted(rows.items(), key=lambda x: order.index(x[0][0])):
    m = {s: statistics.median(v) for s, v in d.items()}
    q = m["qemu-nbd"] or float("nan")
    print("| %s (%s) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |" % (
        wl, unit, m["ours"], m["ours-nocache"], m["ours-direct-thr"],
        m["ours-direct"], m["qemu-nbd"], m["nbdkit"], m["ours"] / q,
        m["ours-nocache"] / q, m["ours-direct-thr"] / q, m["ours-direct"] / q))
PY
