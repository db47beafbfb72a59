#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The memory plugin's first-write cost: copying a file into a fresh
# export, where every byte lands on a page never written before.
#
# Wall time on this shared 2-CPU machine swings by ±20% from run to run,
# so the figures that decide are the server's own: its CPU time
# (utime+stime from /proc/PID/stat, plus cutime+cstime of reaped
# children for nbd-server, which forks per connection) and its minor
# page faults (minflt, plus cminflt), for one fixed workload: nbdcopy of
# a 1 GiB file of random bytes from /dev/shm into a fresh export.
# Variants of the plugin (.so files, e.g. before and after a change) and
# Debian's nbd-server (serving a sparse file on /dev/shm) take turns,
# the order rotating each round; the report prints medians.
#
# Then, per variant, unless --no-rss: resident memory against bytes
# written, for 20000 random 4 KiB writes over a 1 TiB export, and for
# 1 GiB copied in, all of it trimmed, and copied in again (trim must
# hand the memory back, and the second copy must reuse it).
# With --iops SECONDS: 4 KiB random read and write IOPS, QD32, on a
# pre-written 1 GiB export, with server CPU per request.
#
#   bench/memory-first-write.sh [--rounds N] [--build DIR]
#        [--variant LABEL=PLUGIN.so]... [--no-peer] [--no-rss]
#        [--iops SECONDS]
#
# --build: a configured and built out-of-tree build directory (default
# $BENCH_BUILD or /work/build-mem).  Without --variant the build's own
# memory plugin is measured, as "ours".  Needs nbdcopy, nbdinfo, nbdsh,
# fio (ioengine=nbd) and python3.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

rounds=5 iops=0 peer=1 rss=1
build="${BENCH_BUILD:-/work/build-mem}"
variants=()
cmdline="bench/memory-first-write.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    --no-peer) peer=0; shift ;;
    --no-rss) rss=0; shift ;;
    --iops) iops="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds"
build="$(cd "$build" 2>/dev/null && pwd)" || {
  echo "$0: no build directory $build" >&2; exit 1; }
[ ${#variants[@]} -eq 0 ] &&
  variants=("ours=$build/plugins/memory/.libs/nbdkit-memory-plugin.so")


for c in nbdcopy nbdinfo nbdsh fio python3 timeout; do
  command -v $c >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
[ "$peer" -eq 1 ] && ! command -v nbd-server >/dev/null && peer=0

declare -A plugin=()
names=()
for v in "${variants[@]}"; do
  name="${v%%=*}" so="${v#*=}"
  [ -f "$so" ] || die "no plugin $so"
  plugin[$name]="$so"
  names+=("$name")
done
[ "$peer" -eq 1 ] && names+=(nbd-server)

work="$(mktemp -d "${TMPDIR:-/tmp}/memfw.XXXXXX")"
shm="$(mktemp -d /dev/shm/memfw.XXXXXX)"
srv_pid=""

stop_server ()
{
  local c
  [ -n "$srv_pid" ] || return 0
  for c in $(children "$srv_pid"); do kill_pid "$c"; done
  kill_pid "$srv_pid"
  srv_pid=""
}
cleanup ()
{
  local status=$?
  set +e
  stop_server
  rm -rf "$work" "$shm"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_server NAME SIZE: sets srv_pid and srv_uri.
start_server ()
{
  local name="$1" size="$2" i sock="$work/sock" pidfile="$work/pid"
  local file="$shm/nbd-server.img" export=""
  rm -f "$sock" "$pidfile"
  if [ "$name" = nbd-server ]; then
    rm -f "$file"; truncate -s "$size" "$file"
    export=bench
    printf '[generic]\nunixsock = %s\n[bench]\nexportname = %s\n' \
      "$sock" "$file" >"$work/nbd-server.conf"
    timeout 20 nbd-server -C "$work/nbd-server.conf" -p "$pidfile" \
      >"$work/log" 2>&1 || die "nbd-server failed: $(cat "$work/log")"
  else
    "$build/server/nbdkit" -f -U "$sock" -P "$pidfile" \
      "${plugin[$name]}" "$size" >"$work/log" 2>&1 &
  fi
  srv_uri="nbd+unix:///$export?socket=$sock"
  for (( i = 0; i < 200; i++ )); do
    [ -s "$pidfile" ] && timeout 5 nbdinfo --size "$srv_uri" \
      >/dev/null 2>&1 && break
    sleep 0.1
  done
  srv_pid="$(cat "$pidfile")" || die "$name did not start: $(cat "$work/log")"
  wait_children 10
}

# nbd-server's children count (cutime, cminflt) once reaped.

# usage_of PID: "cpu-ticks minor-faults", the process and reaped children.
usage_of ()
{
  python3 - "$1" <<'PY'
import sys
f = open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split()
# after the comm: state=0, minflt=7, cminflt=8, utime=11 .. cstime=14
print(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]),
      int(f[7]) + int(f[8]))
PY
}
rss_kib () { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
hz="$(getconf CLK_TCK)"

note "making a 1 GiB source file of random bytes in $shm"
dd if=/dev/urandom of="$shm/src.img" bs=1M count=1024 status=none

: >"$work/data"

# --- 1. Copy 1 GiB into a fresh export -------------------------------------
for (( r = 1; r <= rounds; r++ )); do
  n=${#names[@]}
  for (( i = 0; i < n; i++ )); do
    name="${names[$(( (i + r - 1) % n ))]}"
    start_server "$name" 2G
    read -r t0 f0 < <(usage_of "$srv_pid")
    s0="$(date +%s.%N)"
    timeout 300 nbdcopy --request-size=262144 "$shm/src.img" "$srv_uri" ||
      die "nbdcopy into $name failed"
    s1="$(date +%s.%N)"
    wait_children 10
    read -r t1 f1 < <(usage_of "$srv_pid")
    echo "copy $name $r $(python3 -c "print($s1 - $s0)") \
$(( t1 - t0 )) $(( f1 - f0 )) $(rss_kib "$srv_pid")" >>"$work/data"
    note "$(tail -1 "$work/data")"
    stop_server
  done
done

# --- 2. Resident memory against bytes written ------------------------------
if [ "$rss" -eq 1 ]; then
  for name in "${names[@]}"; do
    [ "$name" = nbd-server ] && continue
    start_server "$name" 1T
    before="$(rss_kib "$srv_pid")"
    timeout 300 fio --name=sparse --ioengine=nbd --uri="$srv_uri" \
      --rw=randwrite --bs=4k --iodepth=32 --io_size=$(( 20000 * 4096 )) \
      --randrepeat=0 --output="$work/fio.out" >/dev/null ||
      die "fio sparse writes to $name failed"
    echo "rss $name sparse-1T-20000x4k $before $(rss_kib "$srv_pid") \
$(( 20000 * 4 ))" >>"$work/data"
    note "$(tail -1 "$work/data")"
    stop_server

    start_server "$name" 2G
    before="$(rss_kib "$srv_pid")"
    nbdcopy --request-size=262144 "$shm/src.img" "$srv_uri"
    echo "rss $name copy-1G $before $(rss_kib "$srv_pid") 1048576" \
      >>"$work/data"
    nbdsh -u "$srv_uri" -c 'h.trim(1 << 30, 0)'
    echo "rss $name trim-1G $before $(rss_kib "$srv_pid") 0" >>"$work/data"
    nbdcopy --request-size=262144 "$shm/src.img" "$srv_uri"
    echo "rss $name copy-1G-again $before $(rss_kib "$srv_pid") 1048576" \
      >>"$work/data"
    cmp -n 1073741824 "$shm/src.img" <(nbdcopy "$srv_uri" -) ||
      die "$name: the export does not read back as written"
    stop_server
  done
fi

# --- 3. Random 4 KiB IOPS ---------------------------------------------------
if [ "$iops" -gt 0 ]; then
  for (( r = 1; r <= rounds; r++ )); do
    for name in "${names[@]}"; do
      [ "$name" = nbd-server ] && continue
      start_server "$name" 1G
      fio --name=fill --ioengine=nbd --uri="$srv_uri" --rw=write --bs=1M \
        --iodepth=8 --output="$work/fio.out" >/dev/null
      for rw in randread randwrite; do
        read -r t0 f0 < <(usage_of "$srv_pid")
        fio --name=bench --ioengine=nbd --uri="$srv_uri" --rw=$rw --bs=4k \
          --iodepth=32 --runtime="$iops" --time_based --norandommap \
          --randrepeat=0 --output-format=json --output="$work/fio.json" \
          >/dev/null
        read -r t1 f1 < <(usage_of "$srv_pid")
        python3 - "$work/fio.json" "$rw" "$name" "$r" $(( t1 - t0 )) \
          "$hz" >>"$work/data" <<'PY'
import json, sys
path, rw, name, r, ticks, hz = sys.argv[1:]
d = json.load(open(path))["jobs"][0][rw[4:]]
print("iops", name, rw, r, "%.0f" % d["iops"],
      "%.2f" % (int(ticks) / int(hz) * 1e6 / d["total_ios"]))
PY
        note "$(tail -1 "$work/data")"
      done
      stop_server
    done
  done
fi

# --- Report ------------------------------------------------------------------
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; kernel $(uname -r);" \
  "THP $(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled)"
echo "Command: $cmdline"
for name in "${names[@]}"; do
  [ "$name" = nbd-server ] && continue
  echo "  $name: $build/server/nbdkit -f -U SOCK ${plugin[$name]} SIZE"
done
[ "$peer" -eq 1 ] &&
  echo "  nbd-server: nbd-server -C CONF (unixsock = SOCK; exportname = sparse FILE on /dev/shm)"
echo "  copy: nbdcopy --request-size=262144 /dev/shm/.../src.img URI   # 1 GiB of random bytes, 2G export"
echo
python3 - "$work/data" "$hz" "${names[@]}" <<'PY'
import collections, statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
hz = int(sys.argv[2]); names = sys.argv[3:]
copy = collections.defaultdict(list)
for r in rows:
    if r[0] == "copy":
        copy[r[1]].append((float(r[3]), int(r[4]) / hz, int(r[5]), int(r[6])))
if copy:
    peer = "nbd-server" if "nbd-server" in copy else None
    print("| server | wall s | MiB/s | server CPU s | minor faults | RSS after MiB | wall ÷ nbd-server's |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in names:
        if n not in copy: continue
        m = [st.median(x[i] for x in copy[n]) for i in range(4)]
        ratio = "%.2f" % (m[0] / st.median(x[0] for x in copy[peer])) if peer else ""
        print("| %s | %.3f (%.3f–%.3f) | %.0f | %.2f (%.2f–%.2f) | %d | %.0f | %s |" % (
            n, m[0], min(x[0] for x in copy[n]), max(x[0] for x in copy[n]),
            1024 / m[0], m[1], min(x[1] for x in copy[n]),
            max(x[1] for x in copy[n]), m[2], m[3] / 1024, ratio))
    print()
mem = [r for r in rows if r[0] == "rss"]
if mem:
    print("| variant | workload | VmRSS before MiB | VmRSS after MiB | written MiB | growth − written MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for _, n, what, b, a, w in mem:
        b, a, w = int(b) / 1024, int(a) / 1024, int(w) / 1024
        extra = "%+.1f (%+.1f%%)" % (a - b - w, 100 * (a - b - w) / w) if w else ""
        print("| %s | %s | %.1f | %.1f | %.1f | %s |" % (n, what, b, a, w, extra))
    print()
io = collections.defaultdict(list)
for r in rows:
    if r[0] == "iops":
        io[(r[1], r[2])].append((float(r[4]), float(r[5])))
if io:
    print("| variant | workload | IOPS median (min–max) | server CPU µs/req median |")
    print("|---|---|---:|---:|")
    for n in names:
        for rw in ("randread", "randwrite"):
            if (n, rw) not in io: continue
            xs = io[(n, rw)]
            print("| %s | 4K %s QD32 | %.0f (%.0f–%.0f) | %.2f |" % (
                n, rw, st.median(x[0] for x in xs), min(x[0] for x in xs),
                max(x[0] for x in xs), st.median(x[1] for x in xs)))
    print()
print("Raw samples:")
print("```")
for r in rows: print(" ".join(r))
print("```")
PY
