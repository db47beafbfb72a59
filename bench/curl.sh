#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/curl.sh: our curl plugin, on its asynchronous path (the
# default: a libcurl multi event loop) and on its synchronous path
# (-D nbdkit.async=0), beside Debian's nbdkit 1.32 curl plugin, all
# reading the same file from the same nginx.
#
# nginx (started here, one process, its config and logs in a private
# directory, stopped by pid) serves a file of --size MiB of random
# bytes from /dev/shm on 127.0.0.1.  In each round, each server in
# turn (the order rotates from round to round) is started fresh on
# a private Unix socket with "-r curl URL" (ours adds connections=N,
# which nbdkit 1.32 lacks), and measured: fio (ioengine=nbd) 1 MiB
# sequential read at QD8 and 4 KiB random read at QD32 for --runtime
# seconds each, then nbdcopy of the
# whole export to null:, with the server's CPU time during the copy
# (utime+stime from /proc/PID/stat, per GiB).  Prints a markdown table
# of the medians, with async ÷ sync and async ÷ nbdkit on each row; --write-results also puts it in
# bench/RESULTS.md as the section "## curl plugin" (other sections
# kept).
#
#   bench/curl.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--connections N] [--build DIR] [--write-results]
#
# Defaults: 5 rounds, 5 s fio runs, 512 MiB, connections=4; --build
# is our built tree (default: $BENCH_BUILD, else this script's tree).
# Needs nginx, fio with its nbd engine, nbdcopy, nbdinfo and Debian's
# /usr/bin/nbdkit with its curl plugin (exit 77 without one of them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:/usr/sbin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5 runtime=5 size_mib=512 connections=4 write_results=0
build="${BENCH_BUILD:-$srcdir}"
cmdline="bench/curl.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib" \
  --connections "$connections"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory"
ours="$build/nbdkit"
[ -x "$ours" ] && [ -f "$build/plugins/curl/.libs/nbdkit-curl-plugin.so" ] ||
  die "$build has no built nbdkit and curl plugin"
theirs=/usr/bin/nbdkit
[ -x "$theirs" ] || theirs=/usr/sbin/nbdkit
for c in nginx fio nbdcopy nbdinfo; do
  command -v "$c" >/dev/null || { echo "$0: SKIP: no $c"; exit 77; }
done
"$theirs" curl --dump-plugin >/dev/null 2>&1 ||
  { echo "$0: SKIP: no Debian nbdkit curl plugin"; exit 77; }

pids=()
srv_pid="" nginx_pid=""
work="$(mktemp -d /tmp/bench-curl.XXXXXX)"
img="/dev/shm/bench-curl.$$.img"
cleanup ()
{
  local p
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  [ -n "$nginx_pid" ] && kill_pid "$nginx_pid"
  rm -rf "$work" "$img"
}
trap_cleanup

note "making $size_mib MiB in $img"
head -c $(( size_mib * 1024 * 1024 )) /dev/urandom > "$img"
port="$(free_port)"
mkdir -p "$work/nginx/tmp"
cat > "$work/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 256; }
http {
  client_body_temp_path $work/nginx/tmp;
  proxy_temp_path $work/nginx/tmp;
  fastcgi_temp_path $work/nginx/tmp;
  uwsgi_temp_path $work/nginx/tmp;
  scgi_temp_path $work/nginx/tmp;
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    root /dev/shm;
  }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" \
  > "$work/nginx.out" 2>&1 &
nginx_pid=$!
for (( i = 0; i < 100; i++ )); do
  [ -s "$work/nginx/nginx.pid" ] && break
  sleep 0.1
done
[ -s "$work/nginx/nginx.pid" ] || die "nginx did not start: $(cat "$work/nginx/error.log")"
url="http://127.0.0.1:$port/${img##*/}"

# start_server NAME: ours or nbdkit, fresh, on a private socket.
start_server ()
{
  local name="$1" sock="$work/sock" pidfile="$work/pid" i
  rm -f "$sock" "$pidfile"
  case "$name" in
    ours) "$ours" -f -r -U "$sock" -P "$pidfile" curl "$url" \
            connections="$connections" > "$work/server.log" 2>&1 & ;;
    ours-sync) "$ours" -D nbdkit.async=0 -f -r -U "$sock" -P "$pidfile" \
                 curl "$url" connections="$connections" \
                 > "$work/server.log" 2>&1 & ;;
    nbdkit) "$theirs" -f -r -U "$sock" -P "$pidfile" curl "$url" \
              > "$work/server.log" 2>&1 & ;;
  esac
  pids+=("$!")
  for (( i = 0; i < 200; i++ )); do
    [ -s "$pidfile" ] && break
    sleep 0.05
  done
  srv_pid="$(cat "$pidfile" 2>/dev/null)" ||
    die "$name: no pid file: $(tail -3 "$work/server.log")"
  srv_uri="nbd+unix:///?socket=$sock"
}
stop_server () { kill_pid "$srv_pid"; srv_pid=""; }
record () { echo "$*" | tee -a "$work/data" >&2; }

# fio_run NAME FIO-ARGS...: one fio run against the server.
fio_run ()
{
  local name="$1"
  shift
  bounded $(( runtime + 120 )) "$work/fio.log" \
    fio --name=bench --ioengine=nbd --uri="$srv_uri" "$@" \
      --size="${size_mib}m" --runtime="$runtime" --time_based \
      --output-format=json --output="$work/run.json" ||
    die "$name: fio failed: $(tail -3 "$work/fio.log")"
}
# fio_result bw|iops: the last run's read MiB/s or IOPS.
fio_result ()
{
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print(round(j["bw_bytes"] / 2**20, 1) if sys.argv[2] == "bw"
      else round(j["iops"]))' "$work/run.json" "$1"
}

measure ()
{
  local name="$1" rnd="$2" t0 t1 c0 c1
  start_server "$name"
  fio_run "$name" --rw=read --bs=1m --iodepth=8
  record "seqread-1m $name $rnd $(fio_result bw) MiB/s"
  fio_run "$name" --rw=randread --bs=4k --iodepth=32
  record "randread-4k $name $rnd $(fio_result iops) IOPS"
  c0=$(cpu_ticks "$srv_pid")
  t0=$(date +%s.%N)
  bounded 600 "$work/copy.log" nbdcopy "$srv_uri" null: ||
    die "$name: nbdcopy failed: $(tail -3 "$work/copy.log")"
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$srv_pid")
  record "copy-out $name $rnd $(python3 -c "print(round($size_mib / ($t1 - $t0), 1))") MiB/s"
  record "copy-cpu $name $rnd $(python3 -c "print(round(($c1 - $c0) / $(getconf CLK_TCK) * 1024 / $size_mib, 2))") s/GiB"
  stop_server
}

: > "$work/data"
for (( r = 1; r <= rounds; r++ )); do
  note "round $r of $rounds"
  case $(( r % 3 )) in
    1) order="ours ours-sync nbdkit" ;;
    2) order="ours-sync nbdkit ours" ;;
    0) order="nbdkit ours ours-sync" ;;
  esac
  for name in $order; do measure "$name" "$r"; done
done

python3 - "$work/data" > "$work/report" <<PY
import statistics, sys
data = {}
for line in open(sys.argv[1]):
    wl, name, rnd, value, unit = line.split()
    data.setdefault((wl, name), []).append(float(value))
print("## curl plugin")
print()
print("$(date -u +%F), \`$cmdline\`: nginx serving a $size_mib MiB file from")
print("/dev/shm on 127.0.0.1; ours with connections=$connections on its")
print("asynchronous path (a libcurl multi event loop) and with")
print("-D nbdkit.async=0 (a server thread per transfer), Debian's nbdkit")
print("1.32 curl (one libcurl handle per NBD connection, requests serialised);")
print("all -r on a Unix socket.  Medians of $rounds rounds, servers")
print("rotating.  $(nproc) CPUs, shared with other work.")
print()
print("| workload | ours async | ours sync | nbdkit 1.32 | async ÷ sync | async ÷ nbdkit |")
print("|---|---|---|---|---|---|")
for wl, what in [("seqread-1m", "fio 1 MiB sequential read QD8 (MiB/s)"),
                 ("randread-4k", "fio 4 KiB random read QD32 (IOPS)"),
                 ("copy-out", "nbdcopy to null: (MiB/s)"),
                 ("copy-cpu", "server CPU during the copy (s per GiB, lower is better)")]:
    a = statistics.median(data[(wl, "ours")])
    s = statistics.median(data[(wl, "ours-sync")])
    b = statistics.median(data[(wl, "nbdkit")])
    print("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |" % (what, a, s, b, a / s, a / b))
PY
cat "$work/report"
[ "$write_results" -eq 1 ] && write_section "curl plugin" "$work/report"
exit 0
