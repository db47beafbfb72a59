#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/S3.sh: our S3 plugin (C, libcurl), with its asynchronous
# requests (ours) and with -D nbdkit.async=0 (sync: every request on the
# server's workers), beside Debian's nbdkit 1.32 S3 plugin (Python,
# boto3) on the same radosgw, in one run.
#
# A disk of --size MiB in objects of --object-size KiB, one bucket per
# server.  In each slot a fresh server (one per server and workload)
# runs: fio (ioengine=nbd) 1 MiB sequential write, QD8, over the whole
# disk; fio 1 MiB sequential read, QD8; fio 64 KiB random read, QD32
# (randread-64k: many reads in flight, where the asynchronous path
# matters); fio 64 KiB random write, QD32 (randwrite-64k: a PUT of a
# whole object per write) and 4 KiB random write, QD32, of a quarter of
# the disk (randwrite-4k: a read-modify-write per write); nbdcopy of a file of random bytes into the disk (copy-in)
# and of the disk to null: (copy-out).  The slots go round the
# servers, which one goes first turning each round.  Prints a markdown
# table of the medians in MiB/s, async ÷ sync and ours ÷ nbdkit;
# --write-results also puts it in bench/RESULTS.md
# as the section "## S3 plugin".
#
#   bench/S3.sh [--rounds N] [--size MiB] [--object-size KiB]
#        [--cluster DIR] [--build DIR] [--workloads A,B,...]
#        [--write-results]
#
# Defaults: 3 rounds, a 64 MiB disk, 64 KiB objects (Debian's plugin
# refuses objects over 64 KiB: it makes them its minimum block size,
# which nbdkit 1.32 caps at 64 KiB; with larger objects only ours
# runs).  The Ceph
# cluster is started in a temporary directory with tests/ceph-cluster.sh
# and stopped at the end, unless --cluster names a running one (its
# DIR/env is sourced).  The OSD keeps everything in RAM: keep the disk
# small.  --build: our built tree (default: this source tree).  Needs
# fio with its nbd engine, nbdcopy, curl, Debian's /usr/bin/nbdkit with
# its S3 plugin and python3-boto3 (exit 77 without them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 size_mib=64 object_kib=64 cluster="" write_results=0
all_workloads="seqwrite-1m seqread-1m randread-64k randwrite-64k randwrite-4k copy-in copy-out"
workloads=($all_workloads)
build="$srcdir"
cmdline="bench/S3.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --object-size) object_kib="$2"; shift 2 ;;
    --cluster) cluster="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --workloads) IFS=, read -r -a workloads <<< "$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
for wl in "${workloads[@]}"; do
  [[ " $all_workloads " = *" $wl "* ]] || die "unknown workload $wl"
done
need_counts --rounds "$rounds" --size "$size_mib" \
  --object-size "$object_kib"
(( size_mib * 1024 % object_kib == 0 )) ||
  die "--size must be a multiple of --object-size"
for c in fio nbdcopy curl; do
  command -v "$c" >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
[ -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-S3-plugin ] &&
  /usr/bin/python3 -c 'import boto3' 2>/dev/null ||
  { echo "$0: Debian's nbdkit S3 plugin or python3-boto3 missing" >&2
    exit 77; }
ours="$build/nbdkit"
[ -x "$ours" ] && [ -f "$build/plugins/S3/.libs/nbdkit-S3-plugin.so" ] ||
  die "$build has no built S3 plugin"

work="$(mktemp -d /tmp/bench-S3.XXXXXX)"
pids=()
declare -A bucket=()
srv_pid=""
own_cluster=""
cleanup ()
{
  local p
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  if [ -n "$own_cluster" ]; then
    "$srcdir/tests/ceph-cluster.sh" stop "$own_cluster" >/dev/null 2>&1
  else
    # Someone else's cluster: take our buckets away.
    for p in "${bucket[@]}"; do
      radosgw-admin bucket rm --bucket="$p" --purge-objects \
        >/dev/null 2>&1 || :
    done
  fi
  rm -rf "$work"
}
trap_cleanup

if [ -z "$cluster" ]; then
  own_cluster="$work/ceph"
  note "starting a Ceph cluster in $own_cluster"
  "$srcdir/tests/ceph-cluster.sh" start "$own_cluster" >"$work/ceph.log" 2>&1 ||
    die "the cluster did not start: $(tail -5 "$work/ceph.log")"
  cluster="$own_cluster"
fi
# shellcheck disable=SC1091
. "$cluster/env"
export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
export AWS_REGION="$S3_REGION" AWS_DEFAULT_REGION="$S3_REGION"

s3curl ()
{
  curl -sS --max-time 30 -X "$1" --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -o /dev/null \
    -w '%{http_code}' "$S3_ENDPOINT$2"
}
# Debian's plugin cannot serve objects over 64 KiB: ours alone then.
servers=(ours sync nbdkit)
(( object_kib <= 64 )) || servers=(ours sync)
for name in "${servers[@]}"; do
  bucket[$name]="bench-$name-$$"
  [ "$(s3curl PUT "/${bucket[$name]}")" = 200 ] ||
    die "could not make bucket ${bucket[$name]}"
done
head -c "$(( size_mib << 20 ))" /dev/urandom > "$work/src"

# start NAME: a server on a Unix socket, its disk in its own bucket.
start ()
{
  local name="$1" bin sock="$work/sock" i flags=()
  case "$name" in
    ours) bin="$ours" ;;
    sync) bin="$ours"; flags=(-D nbdkit.async=0) ;;
    *) bin=/usr/bin/nbdkit ;;
  esac
  rm -f "$sock" "$work/pid"
  "$bin" "${flags[@]}" -f -U "$sock" -P "$work/pid" S3 endpoint-url="$S3_ENDPOINT" \
    bucket="${bucket[$name]}" key=disk size="${size_mib}M" \
    object-size="${object_kib}K" >"$work/server.log" 2>&1 &
  srv_pid=$!
  for (( i = 0; i < 300; i++ )); do
    [ -s "$work/pid" ] && [ -S "$sock" ] && break
    kill -0 "$srv_pid" 2>/dev/null ||
      die "$name did not start: $(tail -3 "$work/server.log")"
    sleep 0.1
  done
  [ -S "$sock" ] || die "$name did not listen within 30 s"
  srv_uri="nbd+unix:///?socket=$sock"
}
stop () { kill_pid "$srv_pid"; wait "$srv_pid" 2>/dev/null || :; srv_pid=""; }

record () { echo "$*" | tee -a "$work/data" >&2; }

# mibs SECONDS: the disk's size over SECONDS, in MiB/s.
mibs () { python3 -c "print(round($size_mib / $1, 1))"; }
now () { date +%s.%N; }

measure ()
{
  local name="$1" wl="$2" rnd="$3" t0 t1 bw
  start "$name"
  case "$wl" in
    seqwrite-1m|seqread-1m|randread-64k|randwrite-64k|randwrite-4k)
      local rw=write bs=1m qd=8 io=$size_mib
      case "$wl" in
        seqread-1m) rw=read ;;
        randread-64k) rw=randread bs=64k qd=32 ;;
        randwrite-64k) rw=randwrite bs=64k qd=32 ;;
        randwrite-4k) rw=randwrite bs=4k qd=32 io=$(( (size_mib + 3) / 4 )) ;;
      esac
      bounded 600 "$work/fio.log" \
        fio --name=bench --ioengine=nbd --uri="$srv_uri" --numjobs=1 \
          --rw="$rw" --bs="$bs" --iodepth="$qd" --size="${size_mib}M" \
          --io_size="${io}M" \
          --output-format=json --output="$work/run.json" || {
        # Debian's Python plugin fails some rows: a gap, not the end.
        [ "$name" = nbdkit ] ||
          die "fio $wl on $name failed: $(tail -3 "$work/fio.log")"
        note "fio $wl on nbdkit failed: $(tail -1 "$work/fio.log")"
        stop
        return 0
      }
      bw="$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(round((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 2**20, 1))' \
        "$work/run.json")" ;;
    copy-in|copy-out)
      t0=$(now)
      if [ "$wl" = copy-in ]; then
        bounded 600 "$work/copy.log" nbdcopy "$work/src" "$srv_uri"
      else
        bounded 600 "$work/copy.log" nbdcopy "$srv_uri" null:
      fi || die "nbdcopy $wl on $name failed: $(tail -3 "$work/copy.log")"
      t1=$(now)
      bw="$(mibs "$(python3 -c "print($t1 - $t0)")")" ;;
  esac
  stop
  record "$wl $name $rnd $bw"
}

for (( r = 1; r <= rounds; r++ )); do
  note "round $r of $rounds"
  # Turn the order one place each round: each server goes first in turn.
  order=()
  for (( i = 0; i < ${#servers[@]}; i++ )); do
    order+=("${servers[(i + r - 1) % ${#servers[@]}]}")
  done
  for wl in "${workloads[@]}"; do
    for name in "${order[@]}"; do measure "$name" "$wl" "$r"; done
  done
done

report="$work/report.md"
python3 - "$work/data" "$cmdline" "$size_mib" "$object_kib" "$rounds" \
  >"$report" <<'PY'
import statistics as st, sys
data, cmd, size, obj, rounds = sys.argv[1:]
g = {}
for line in open(data):
    wl, name, rnd, bw = line.split()
    g.setdefault((wl, name), []).append(float(bw))
print("## S3 plugin\n")
print(f"`{cmd}`: a {size} MiB disk in {obj} KiB objects on one radosgw "
      f"(memstore OSD), {rounds} rounds, medians in MiB/s.  Ours: C on "
      "libcurl, requests asynchronous; sync: ours with -D nbdkit.async=0; "
      "nbdkit: Debian's nbdkit 1.32 S3 plugin (Python, boto3).\n")
print("| workload | ours | min–max | sync | min–max | ours ÷ sync "
      "| nbdkit | min–max | ours ÷ nbdkit |")
print("|---|---|---|---|---|---|---|---|---|")
def cols(v):
    return (f"{st.median(v):.1f}", f"{min(v):.1f}–{max(v):.1f}") if v \
        else ("—", "—")
for wl in ("seqwrite-1m", "seqread-1m", "randread-64k", "randwrite-64k",
           "randwrite-4k", "copy-in", "copy-out"):
    o, s, n = (g.get((wl, x), []) for x in ("ours", "sync", "nbdkit"))
    if not o:
        continue
    mo = st.median(o)
    rs = f"{mo / st.median(s):.2f}" if s else "—"
    rn = f"{mo / st.median(n):.2f}" if n else \
        "(nbdkit's refuses objects over 64 KiB)" if int(obj) > 64 else \
        "(nbdkit's failed)"
    print(f"| {wl} | {' | '.join(cols(o))} | {' | '.join(cols(s))} | {rs} "
          f"| {' | '.join(cols(n))} | {rn} |")
PY
cat "$report"
if [ "$write_results" -eq 1 ]; then
  write_section "S3 plugin" "$report"
fi
