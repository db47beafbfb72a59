#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/compare.sh: our server side by side with the peers installed from
# Debian (nbdkit, qemu-nbd, nbd-server), on a Unix socket and on TCP over
# 127.0.0.1.
#
# One server runs at a time, on its own private socket or port, started
# fresh for its slot; within each round every server gets a slot per
# transport, in an order that rotates from round to round.  In a slot:
# nbdcopy of a 1 GiB file (in /dev/shm) into the export, nbdcopy of the
# export to null:, then fio (ioengine=nbd): 4 KiB random read and write
# QD32, 4 connections x QD8 random read, 1 MiB sequential read and write
# QD8, and 4 KiB QD1 read latency (p50, p99).  Around each run the
# server's CPU time comes from /proc/PID/stat (utime+stime, plus
# cutime+cstime for the children nbd-server forks per connection) and
# its peak RSS from VmHWM in /proc/PID/status (the children's too).
# Then: IOPS against 1/2/4/8 connections (ours, nbdkit) and against -t
# (ours); the limit (one stream of 1 MiB writes, bench/unix-stream-limit.c,
# over Unix also with the send buffer grown as ours grows its own); and
# the memory plugin's RSS after writing 256 MiB, and of a 1 TiB
# export before any write.  Prints a markdown report on stdout;
# --write-results also puts it in bench/RESULTS.md as the section
# "## Peers" (other sections are kept).
#
#   bench/compare.sh [--rounds N] [--runtime SECONDS] [--quick]
#        [--build DIR] [--write-results] [--servers LIST]
#        [--workloads LIST] [--transports LIST] [--check PERCENT]
#
# --write-results (a full run only) also rewrites the "## Current
# standing" table that opens bench/RESULTS.md (bench/current-standing.py
# makes it from this run's raw samples).
#
# Choosing rows: --servers ours,nbdkit (ours is always in),
# --workloads randread-4k,seqread-1m (of copy-in copy-out randread-4k
# randwrite-4k randread-4k-4conn seqread-1m seqwrite-1m lat-4k-qd1),
# --transports unix,tcp.  With any of them only the side-by-side phase
# runs (no scaling, limit or memory phases).  --ours-args STRING adds
# words to our server's command line before the plugin, --ours-params
# STRING key=value words after it (for example --ours-args
# --filter=cache --ours-params cache-max-size=256M, to see what a
# filter costs).
#
# Over TLS: --tls psk|x509 serves every export with TLS required (our
# server and nbdkit with --tls=require and --tls-psk=FILE or
# --tls-certificates=DIR, qemu-nbd with a tls-creds-psk or
# tls-creds-x509 object, each with its default priority; nbd-server is
# left out), on keys and certificates made by tests/make-tls-files.sh,
# the clients connecting with nbds:// URIs.  Its rows default to
# copy-in copy-out randread-4k seqread-1m seqwrite-1m, and
# --write-results puts them in the section "## Peers over TLS (PSK)" or
# "(X.509)".  fio's nbd engine cannot name a key file in its URI, so it
# runs with bench/libnbd-allow-local.c preloaded (needs cc and
# libnbd-dev).
#
# Regression mode: --check PERCENT runs the chosen rows (servers default
# to ours and nbdkit) and exits 3 when on any row ours falls more than
# PERCENT behind a peer (throughput below (100 - PERCENT)% of the
# peer's median, latency above (100 + PERCENT)%), after printing a
# verdict per row.  For example, before landing a change to the send
# path:
#   bench/compare.sh --check 5 --rounds 5 --workloads seqread-1m,copy-in --transports tcp
#
# --quick: 1 round of 1 s runs of 4 KiB random read and 1 MiB sequential
# read only, on a 256M export, no scaling or memory phases (a smoke test,
# < 60 s).  --build: our configured and built out-of-tree build directory
# (default $BENCH_BUILD or /tmp/build-bench).  Needs fio (ioengine=nbd),
# nbdcopy, nbdinfo and python3 (exit 77 without fio); a peer that is not
# installed is left out; the limit needs a C compiler (cc).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"    # libnbd's tools, Debian's nbdkit is a peer
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=5 quick=0 write_results=0
sel_servers="" sel_workloads="" sel_transports="" check="" ours_args="" ours_params="" tls=""
build="${BENCH_BUILD:-/tmp/build-bench}"
cmdline="bench/compare.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    --servers) sel_servers="$2"; shift 2 ;;
    --workloads) sel_workloads="$2"; shift 2 ;;
    --transports) sel_transports="$2"; shift 2 ;;
    --check) check="$2"; shift 2 ;;
    --ours-args) ours_args="$2"; shift 2 ;;
    --ours-params) ours_params="$2"; shift 2 ;;
    --tls) tls="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
[ "$quick" -eq 1 ] && rounds=1 runtime=1
need_counts --rounds "$rounds" --runtime "$runtime"
if [ -n "$check" ]; then
  case "$check" in ''|*[!0-9]*) die "--check takes a whole percentage (0-99), not \"$check\"" ;; esac
  [ "$check" -lt 100 ] || die "--check takes a percentage below 100, not $check"
fi
# A partial run (rows chosen, or a check) measures side by side only.
partial=0
[ -n "$sel_servers$sel_workloads$sel_transports$check$ours_args$ours_params" ] && partial=1
# Over TLS, or in a partial run, only the side-by-side phase runs.
side_only=$partial
[ -n "$tls" ] && side_only=1
case "$tls" in ''|psk|x509) ;; *) die "--tls takes psk or x509, not \"$tls\"" ;; esac
[ "$partial" -eq 1 ] && [ "$write_results" -eq 1 ] &&
  die "--write-results needs a full run (no --servers, --workloads, --transports or --check)"
build="$(cd "$build" 2>/dev/null && pwd)" || {
  echo "$0: no build directory ${build}" >&2; exit 1; }


command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
for c in nbdcopy nbdinfo python3 timeout; do
  command -v $c >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
[ -x "$build/nbdkit" ] && [ -x "$build/server/nbdkit" ] ||
  die "$build is not a built build directory (no ./nbdkit)"

if [ "$quick" -eq 1 ]; then
  size=256M size_mib=256
  workloads=(randread-4k seqread-1m)
else
  size=1G size_mib=1024
  workloads=(copy-in copy-out randread-4k randwrite-4k randread-4k-4conn
             seqread-1m seqwrite-1m lat-4k-qd1)
fi
servers=(ours)
command -v nbdkit >/dev/null && servers+=(nbdkit)
command -v qemu-nbd >/dev/null && servers+=(qemu-nbd)
command -v nbd-server >/dev/null && servers+=(nbd-server)
transports=(unix tcp)
all_workloads=(copy-in copy-out randread-4k randwrite-4k randread-4k-4conn
               seqread-1m seqwrite-1m lat-4k-qd1)

# pick OPTION LIST KNOWN...: set "picked" to the names of the
# comma-separated LIST, each checked against KNOWN (exit 2 on an
# unknown one, or on an empty LIST).
pick ()
{
  local opt="$1" list="$2" n k ok
  shift 2
  picked=()
  for n in ${list//,/ }; do
    ok=0
    for k in "$@"; do [ "$n" = "$k" ] && ok=1; done
    [ "$ok" -eq 1 ] || { echo "$0: $opt: unknown or unavailable \"$n\" (one of: $*)" >&2; exit 2; }
    picked+=("$n")
  done
  [ "${#picked[@]}" -gt 0 ] || { echo "$0: $opt: nothing given" >&2; exit 2; }
}
[ -z "$sel_servers" ] && [ -n "$check" ] && sel_servers=ours,nbdkit
if [ -n "$tls" ]; then
  # nbd-server's TLS needs a configuration of its own: left out.
  for i in "${!servers[@]}"; do
    [ "${servers[$i]}" = nbd-server ] && unset 'servers[i]'
  done
  servers=("${servers[@]}")
  if [ "$quick" -eq 1 ]; then workloads=(randread-4k seqread-1m)
  else workloads=(copy-in copy-out randread-4k seqread-1m seqwrite-1m); fi
fi
if [ -n "$sel_servers" ]; then
  pick --servers "$sel_servers" "${servers[@]}"
  servers=(ours)
  for n in "${picked[@]}"; do [ "$n" = ours ] || servers+=("$n"); done
  [ -n "$check" ] && [ "${#servers[@]}" -lt 2 ] &&
    die "--check needs a peer besides ours (installed: ${servers[*]})"
fi
if [ -n "$sel_workloads" ]; then
  pick --workloads "$sel_workloads" "${all_workloads[@]}"
  workloads=("${picked[@]}")
fi
if [ -n "$sel_transports" ]; then
  pick --transports "$sel_transports" unix tcp
  transports=("${picked[@]}")
fi
copy_request=262144     # nbdcopy --request-size: CPU/req counts these
for c in certtool psktool cc; do
  [ -z "$tls" ] || command -v $c >/dev/null || { echo "$0: --tls needs $c" >&2; exit 77; }
done

# --- Cleanup: everything we start is killed on every exit path ---------

# Backing files live in /dev/shm (tmpfs), the rest in a private directory.
work="$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")"
shm="$(mktemp -d /dev/shm/compare.XXXXXX)"
pids=()                 # background commands we started
note "work directories: $work $shm"
srv_pid=""              # the running server (nbd-server daemonises)

cleanup ()
{
  local status=$? p
  set +e
  [ -n "$srv_pid" ] && stop_server
  # A daemonised nbd-server that died before we read its pid file.
  p="$(cat "$work/nbd-server.pid" 2>/dev/null)"
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = nbd-server ] &&
    { for c in $(children "$p"); do kill_pid "$c"; done; kill_pid "$p"; }
  for p in "${pids[@]}"; do kill_pid "$p"; done
  if [ -n "${KEEP_WORK:-}" ]; then
    echo "# kept $work and $shm" >&2
  else
    rm -rf "$work" "$shm"
  fi
  exit $status
}
trap_cleanup

# bounded SECONDS LOG CMD...: run CMD under timeout in the background and
# wait for it, so that a signal to this script is handled at once (bash
# runs traps only between foreground commands) and kills it too.
# --- Servers ---------------------------------------------------------------

# TLS: the keys, certificates and the shim fio needs (see the header).
tls_server=() tls_uri="" fio_env=()
case "$tls" in
  psk|x509)
    bounded 120 "$work/tls.err" bash "$srcdir/tests/make-tls-files.sh" "$work/tls" ||
      die "making the TLS files failed: $(tail -3 "$work/tls.err")"
    bounded 120 "$work/shim.err" cc -O2 -shared -fPIC \
      -o "$work/libnbd-allow-local.so" "$srcdir/bench/libnbd-allow-local.c" -lnbd -ldl ||
      die "building the libnbd shim failed: $(tail -3 "$work/shim.err")"
    fio_env=(env "LD_PRELOAD=$work/libnbd-allow-local.so") ;;
esac
case "$tls" in
  psk) tls_server=(--tls=require "--tls-psk=$work/tls/keys.psk")
       tls_uri="tls-psk-file=$work/tls/keys.psk" ;;
  x509) tls_server=(--tls=require "--tls-certificates=$work/tls/server")
        tls_uri="tls-certificates=$work/tls/client" ;;
esac

# The exact command lines, for the report (SOCK, PORT, FILE, PIDFILE).
declare -A srv_cmd=(
  [ours]="BUILD/nbdkit -f -U SOCK|-i 127.0.0.1 -p PORT -P PIDFILE [-t N] ${ours_args:+$ours_args }memory $size${ours_params:+ $ours_params}"
  [nbdkit]="/usr/bin/nbdkit -f -U SOCK|-i 127.0.0.1 -p PORT -P PIDFILE memory $size"
  [qemu-nbd]="qemu-nbd -f raw --cache=writeback --aio=threads --persistent --shared=16 --pid-file=PIDFILE -k SOCK|-b 127.0.0.1 -p PORT FILE"
  [nbd-server]="nbd-server -C CONF -p PIDFILE, CONF: [generic] unixsock = SOCK | listenaddr = 127.0.0.1, port = PORT; max_threads = 4 (default); [bench] exportname = FILE"
)

# start_server NAME TRANSPORT [THREADS]: sets srv_pid, srv_uri.  The
# export starts empty: the memory plugin is new, a backing file is
# truncated to nothing and back to $size (sparse, as the plugin is).
start_server ()
{
  local name="$1" tr="$2" threads="${3:-}" i port="" sock pidfile log
  local addr file="$shm/$name.img" export=""
  sock="$work/$name.sock" pidfile="$work/$name.pid" log="$work/$name.log"
  rm -f "$sock" "$pidfile"
  if [ "$tr" = tcp ]; then
    port="$(free_port)"
    addr=(-i 127.0.0.1 -p "$port")
  else
    addr=(-U "$sock")
  fi
  case "$name" in
    ours|nbdkit)
      local bin=/usr/bin/nbdkit extra=() params=()
      if [ "$name" = ours ]; then
        bin="$build/nbdkit"
        read -ra extra <<<"$ours_args"
        read -ra params <<<"$ours_params"
      fi
      "$bin" -f "${addr[@]}" -P "$pidfile" ${threads:+-t "$threads"} \
        "${tls_server[@]}" "${extra[@]}" memory "$size" "${params[@]}" >"$log" 2>&1 &
      pids+=("$!") ;;
    qemu-nbd)
      rm -f "$file"; truncate -s "$size" "$file"
      [ "$tr" = tcp ] && addr=(-b 127.0.0.1 -p "$port") || addr=(-k "$sock")
      # writeback: the file is in tmpfs, whose page cache is the storage,
      # so there is no second copy to avoid (and tmpfs may refuse
      # O_DIRECT); --shared: up to 16 clients at once, as the others.
      local qtls=()
      case "$tls" in
        psk) qtls=(--object "tls-creds-psk,id=tls0,endpoint=server,dir=$work/tls"
                   --tls-creds tls0) ;;
        x509) qtls=(--object "tls-creds-x509,id=tls0,endpoint=server,dir=$work/tls/server,verify-peer=off"
                    --tls-creds tls0) ;;
      esac
      qemu-nbd -f raw --cache=writeback --aio=threads --persistent \
        --shared=16 --pid-file="$pidfile" "${qtls[@]}" "${addr[@]}" "$file" \
        >"$log" 2>&1 &
      pids+=("$!") ;;
    nbd-server)
      rm -f "$file"; truncate -s "$size" "$file"
      export=bench
      { echo "[generic]"
        if [ "$tr" = tcp ]; then
          echo "listenaddr = 127.0.0.1"; echo "port = $port"
        else
          echo "unixsock = $sock"
        fi
        echo "[bench]"
        echo "exportname = $file"; } >"$work/nbd-server.conf"
      # It daemonises (-d would serve one client only): its pid comes
      # from the pid file, and it forks a child per connection.
      timeout 20 nbd-server -C "$work/nbd-server.conf" -p "$pidfile" \
        >"$log" 2>&1 || die "nbd-server failed: $(cat "$log")" ;;
    *) die "unknown server $name" ;;
  esac
  local user=""
  [ "$tls" = psk ] && user="alice@"
  if [ "$tr" = tcp ] && [ -n "$tls" ]; then
    srv_uri="nbds://${user}127.0.0.1:$port/$export?$tls_uri"
  elif [ "$tr" = tcp ]; then
    srv_uri="nbd://127.0.0.1:$port/$export"
  elif [ -n "$tls" ]; then
    srv_uri="nbds+unix://${user}/$export?socket=$sock&$tls_uri"
  else
    srv_uri="nbd+unix:///$export?socket=$sock"
  fi
  for (( i = 0; i < 200; i++ )); do
    [ -s "$pidfile" ] && break
    sleep 0.1
  done
  srv_pid="$(cat "$pidfile" 2>/dev/null)" ||
    die "$name ($tr) wrote no pid file within 20 s: $(tail -3 "$log")"
  # Ready when a client can connect and read the size.
  for (( i = 0; i < 100; i++ )); do
    timeout 5 nbdinfo --size "$srv_uri" >/dev/null 2>&1 && break
    kill -0 "$srv_pid" 2>/dev/null || die "$name died: $(tail -3 "$log")"
    sleep 0.2
  done
  timeout 5 nbdinfo --size "$srv_uri" >/dev/null 2>&1 ||
    die "$name ($tr) did not serve $srv_uri within 20 s: $(tail -3 "$log")"
  wait_children
  note "server $name pid $srv_pid on $srv_uri"
}

# A server's data goes when its slot ends: the memory plugin's with the
# process, a backing file's here.  This VM reports memory freed for a
# few seconds to its host (virtio-balloon free page reporting), and
# touching such a page again costs a fault in the host, so a slot that
# follows one whose 1 GiB stayed allocated copied in at a third of the
# speed (bench/HISTORY.md): each slot starts just after 1 GiB was freed.
stop_server ()
{
  local c
  for c in $(children "$srv_pid"); do kill_pid "$c"; done
  kill_pid "$srv_pid"
  srv_pid=""
  rm -f "$shm/qemu-nbd.img" "$shm/nbd-server.img"
}

# nbd-server's per-connection children are counted (cutime, cstime) only
# once reaped: wait for them to go before reading the clock.
# cpu_ticks PID: utime+stime+cutime+cstime (dead threads and reaped
# children included).
clk_tck="$(getconf CLK_TCK)"

# hwm_kib PID: VmHWM of PID plus that of its children (bash builtins only:
# the sampler below must cost the server nothing).
hwm_kib ()
{
  local sum=0 f k v u
  for f in "/proc/$1/status" $(for c in $(children "$1"); do
                                 echo "/proc/$c/status"; done); do
    while read -r k v u; do
      [ "$k" = "VmHWM:" ] && { sum=$(( sum + v )); break; }
    done 2>/dev/null <"$f" || :
  done
  echo "$sum"
}
# Peak RSS while a command runs: a sampler every 0.5 s (children come and
# go with their connections), and a last look after.
sampler_start ()
{
  ( peak=0
    while :; do
      v="$(hwm_kib "$srv_pid")"
      (( v > peak )) && { peak=$v; echo "$peak" >"$work/peak"; }
      sleep 0.5
    done ) &
  sampler_pid=$!
  pids+=("$sampler_pid")
}
sampler_stop ()
{
  local v peak
  v="$(hwm_kib "$srv_pid")"
  kill "$sampler_pid" 2>/dev/null || :
  wait "$sampler_pid" 2>/dev/null || :
  unset 'pids[${#pids[@]}-1]'
  peak="$(cat "$work/peak" 2>/dev/null || echo 0)"
  rm -f "$work/peak"
  echo $(( v > peak ? v : peak ))
}

# --- Workloads --------------------------------------------------------------

# fio_run URI RW BS QD JOBS OUT.json: one bounded fio run, each job its own
# connection.
fio_run ()
{
  local uri="$1" rw="$2" bs="$3" qd="$4" jobs="$5" out="$6"
  bounded $(( runtime + 60 )) "$out.err" \
    "${fio_env[@]}" fio --name=bench --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
      --iodepth="$qd" --numjobs="$jobs" --group_reporting \
      --runtime="$runtime" --time_based --norandommap --randrepeat=0 \
      --output-format=json --output="$out" ||
    die "fio failed ($rw $bs QD$qd x$jobs on $uri): $(tail -3 "$out.err")"
}

declare -A wl_fio=(
  [randread-4k]="randread 4k 32 1"   [randwrite-4k]="randwrite 4k 32 1"
  [randread-4k-4conn]="randread 4k 8 4"
  [seqread-1m]="read 1M 8 1"         [seqwrite-1m]="write 1M 8 1"
  [lat-4k-qd1]="randread 4k 1 1")

# measure PHASE SERVER TRANSPORT WORKLOAD ROUND: one run on the running
# server; appends "phase server transport workload round value unit
# cpu-µs/req peak-RSS-KiB requests" lines to $work/data (two lines, p50
# and p99, for the latency workload).
measure ()
{
  local phase="$1" name="$2" tr="$3" wl="$4" rnd="$5" t0 t1 t_start t_end
  local out="$work/$phase-$name-$tr-$wl-$rnd.json" rss what
  t0="$(cpu_ticks "$srv_pid")"
  sampler_start
  case "$wl" in
    copy-in|copy-out)
      if [ "$wl" = copy-in ]; then what=("$shm/source.img" "$srv_uri")
      else what=("$srv_uri" null:); fi
      t_start="$(date +%s.%N)"
      bounded $(( size_mib / 10 + 120 )) "$out.err" \
        nbdcopy --request-size=$copy_request "${what[@]}" ||
        die "nbdcopy $wl failed on $srv_uri: $(tail -3 "$out.err")"
      t_end="$(date +%s.%N)"
      echo "{\"seconds\": $(python3 -c "print($t_end - $t_start)")}" >"$out"
      ;;
    conns-*)
      fio_run "$srv_uri" randread 4k 8 "${wl#conns-}" "$out" ;;
    *)
      fio_run "$srv_uri" ${wl_fio[$wl]} "$out" ;;
  esac
  wait_children
  t1="$(cpu_ticks "$srv_pid")"
  rss="$(sampler_stop)"
  python3 - "$out" "$phase" "$name" "$tr" "$wl" "$rnd" $(( t1 - t0 )) \
    "$clk_tck" "$rss" "$size_mib" "$copy_request" >>"$work/data" <<'PY'
import json, sys
out, phase, name, tr, wl, rnd, ticks, hz, rss, size_mib, req = sys.argv[1:]
cpu_s = int(ticks) / int(hz)
def line(value, unit, ios):
    cpu = cpu_s * 1e6 / ios if ios else 0
    print(phase, name, tr, wl, rnd, "%.3f" % value, unit, "%.3f" % cpu,
          rss, ios)
r = json.load(open(out))
if wl.startswith("copy-"):
    ios = int(size_mib) * 2**20 // int(req)
    line(int(size_mib) / r["seconds"], "MiB/s", ios)
else:
    job = r["jobs"][0]
    d = job["write"] if "write" in wl else job["read"]
    ios = d["total_ios"]
    if wl.startswith("lat-"):
        p = d["clat_ns"]["percentile"]
        wl0 = wl
        for q in ("50.000000", "99.000000"):
            wl = wl0 + "-p" + q[:2]
            line(p[q] / 1000, "µs", ios)
    elif "seq" in wl:
        line(d["bw_bytes"] / 2**20, "MiB/s", ios)
    else:
        line(d["iops"], "IOPS", ios)
PY
  note "$(tail -1 "$work/data")"
}

# --- 1. Servers side by side -----------------------------------------------

if [[ " ${workloads[*]} " == *" copy-in "* ]]; then
  note "making the $size source file in /dev/shm"
  bounded 300 "$work/source.err" \
    dd if=/dev/urandom of="$shm/source.img" bs=1M count="$size_mib" ||
    die "cannot make the source file: $(tail -2 "$work/source.err")"
fi
# The first slot, too, starts just after $size was freed (see stop_server).
bounded 300 "$work/warm.err" \
  dd if=/dev/zero of="$shm/warm.img" bs=1M count="$size_mib" ||
  die "cannot write $shm/warm.img: $(tail -2 "$work/warm.err")"
rm -f "$shm/warm.img"
note "servers: ${servers[*]}; transports: ${transports[*]}; $rounds rounds of $runtime s runs"

for (( r = 1; r <= rounds; r++ )); do
  n=${#servers[@]}
  for (( i = 0; i < n; i++ )); do
    name="${servers[$(( (i + r - 1) % n ))]}"
    for tr in "${transports[@]}"; do
      start_server "$name" "$tr"
      for wl in "${workloads[@]}"; do
        measure main "$name" "$tr" "$wl" "$r"
      done
      stop_server
    done
  done
done

# --- 2. Scaling: connections and worker threads, Unix socket -----------------

# fill NAME: write the whole export once (not measured), so reads hit data.
fill ()
{
  bounded 300 "$work/fill.err" \
    fio --name=fill --ioengine=nbd --uri="$srv_uri" --rw=write --bs=1M \
      --iodepth=8 --output="$work/fill.out" ||
    die "filling the $1 export failed: $(tail -3 "$work/fill.err")"
}

conn_counts=(1 2 4 8)
thread_counts=(1 2 4 8 16)
if [ "$quick" -eq 0 ] && [ "$side_only" -eq 0 ]; then
  conn_servers=(ours)
  command -v nbdkit >/dev/null && conn_servers+=(nbdkit)
  for (( r = 1; r <= rounds; r++ )); do
    for name in "${conn_servers[@]}"; do
      start_server "$name" unix
      fill "$name"
      for c in "${conn_counts[@]}"; do
        measure conns "$name" unix "conns-$c" "$r"
      done
      stop_server
    done
    for t in "${thread_counts[@]}"; do
      start_server ours unix "$t"
      fill ours
      measure threads "ours-t$t" unix randread-4k "$r"
      stop_server
    done
  done
fi

# --- 3. The limit: one stream of 1 MiB writes --------------------------------

limit_note=""
if [ "$side_only" -eq 1 ]; then
  :   # a partial or TLS run measures the side-by-side rows only
elif command -v cc >/dev/null &&
   cc -O2 -pthread -o "$work/unix-stream-limit" "$srcdir/bench/unix-stream-limit.c" \
     2>"$work/cc.err"; then
  limits=("${transports[@]}")
  [[ " ${transports[*]} " == *" unix "* ]] && limits+=(unix-grown)
  for (( r = 1; r <= rounds; r++ )); do
    for tr in "${limits[@]}"; do
      bounded $(( runtime + 30 )) "$work/limit.out" \
        "$work/unix-stream-limit" "$tr" "$runtime" ||
        die "unix-stream-limit failed: $(cat "$work/limit.out")"
      echo "limit stream $tr stream-1m $r $(awk '{ print $2 }' "$work/limit.out") MiB/s 0 0 0" \
        >>"$work/data"
      note "$(tail -1 "$work/data")"
    done
  done
else
  limit_note="no C compiler (cc): the limit was not measured"
fi

# --- 4. Memory: the plugin's RSS against what was written --------------------

rss_kib ()
{
  local k v u
  while read -r k v u; do
    [ "$k" = "VmRSS:" ] && { echo "$v"; return; }
  done <"/proc/$1/status"
}
: >"$work/memory"
if [ "$quick" -eq 0 ] && [ "$side_only" -eq 0 ]; then
  head -c 256M "$shm/source.img" >"$shm/source-256M.img"
  for name in ours nbdkit; do
    [ "$name" = nbdkit ] && ! command -v nbdkit >/dev/null && continue
    size=1T
    start_server "$name" unix
    echo "$name sparse-1T $(rss_kib "$srv_pid")" >>"$work/memory"
    stop_server
    size=1G
    start_server "$name" unix
    before="$(rss_kib "$srv_pid")"
    bounded 120 "$work/mem-copy.err" \
      nbdcopy --request-size=$copy_request "$shm/source-256M.img" "$srv_uri" ||
      die "writing 256 MiB failed: $(tail -3 "$work/mem-copy.err")"
    after="$(rss_kib "$srv_pid")"
    echo "$name written-256M $before $after" >>"$work/memory"
    stop_server
  done
  rm -f "$shm/source-256M.img"
fi

# --- Report ------------------------------------------------------------------

ver () { local v; v="$("$@" 2>&1 | head -1)" || :; echo "${v:-none}"; }
ver_ours="$(ver "$build/nbdkit" --version)"
ver_nbdkit="$(command -v nbdkit >/dev/null && ver nbdkit --version || echo 'not installed')"
ver_qemu="$(command -v qemu-nbd >/dev/null && ver qemu-nbd --version || echo 'not installed')"
ver_nbdsrv="$(command -v nbd-server >/dev/null && nbd-server -V 2>&1 | grep -m1 version || echo 'not installed')"
ver_fio="$(fio --version)"
ver_libnbd="$(ver nbdcopy --version)"
head_rev="$(git -C "$srcdir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$srcdir" status --porcelain 2>/dev/null | grep -c . || :)"
export REPORT_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export REPORT_HEAD="git HEAD: $head_rev ($dirty uncommitted paths); $(nproc) CPUs; kernel $(uname -r)"
export REPORT_VERSIONS="ours: $ver_ours; nbdkit: $ver_nbdkit; qemu-nbd: $ver_qemu; nbd-server: $ver_nbdsrv; fio: $ver_fio; libnbd: $ver_libnbd"
export REPORT_SETUP="Rounds: $rounds, $runtime s per fio run; exports of $size; servers: ${servers[*]}"
case "$tls" in
  psk) section_title="Peers over TLS (PSK)"
       REPORT_SETUP="$REPORT_SETUP; TLS required, PSK (user alice), each server's default priority" ;;
  x509) section_title="Peers over TLS (X.509)"
        REPORT_SETUP="$REPORT_SETUP; TLS required, X.509 (ECDSA certificates, client certificate presented, not verified), each server's default priority" ;;
  *) section_title="Peers" ;;
esac
export REPORT_SETUP REPORT_TITLE="$section_title"
export REPORT_LIMIT_NOTE="$limit_note" REPORT_QUICK="$quick"
export REPORT_CHECK="$check" REPORT_CHECK_FILE="$work/check-behind"

python3 - "$work/data" "$work/memory" "$clk_tck" <<'PY' >"$work/report.md"
import collections, os, statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
mem = [l.split() for l in open(sys.argv[2])]
hz = sys.argv[3]
g = collections.defaultdict(list)
for phase, name, tr, wl, rnd, v, unit, cpu, rss, ios in rows:
    g[(phase, name, tr, wl)].append((float(v), unit, float(cpu), int(rss)))
def med(k, i=0): return st.median(x[i] for x in g[k])
def rng(k):
    xs = [x[0] for x in g[k]]
    f = "%.1f" if max(xs) < 100 else "%.0f"
    return (f + "–" + f) % (min(xs), max(xs))
def num(x): return "%.1f" % x if x < 100 else "%.0f" % x
E = os.environ
print("## " + E["REPORT_TITLE"])
print()
print("Date: %s; %s." % (E["REPORT_DATE"], E["REPORT_HEAD"]))
print("Versions: %s." % E["REPORT_VERSIONS"])
print("%s; one server at a time, started fresh for its slot," % E["REPORT_SETUP"])
print("the order rotating each round; Unix socket and TCP on 127.0.0.1.")
if E["REPORT_QUICK"] == "1":
    print()
    print("**--quick smoke run: 1 round of 1 s, exports not pre-written; not a measurement.**")
print()
names = {"randread-4k": "4K randread QD32", "randwrite-4k": "4K randwrite QD32",
         "randread-4k-4conn": "4K randread 4 conn x QD8",
         "seqread-1m": "1M seqread QD8", "seqwrite-1m": "1M seqwrite QD8",
         "lat-4k-qd1-p50": "4K read QD1 p50 latency (lower is better)",
         "lat-4k-qd1-p99": "4K read QD1 p99 latency (lower is better)",
         "copy-out": "nbdcopy export → null:", "copy-in": "nbdcopy file → export"}
order = list(names)
servers = []
for r in rows:
    if r[0] == "main" and r[1] not in servers: servers.append(r[1])
limit = {tr: st.median(x[0] for x in g[("limit", "stream", tr, "stream-1m")])
         for tr in ("unix", "unix-grown", "tcp")
         if ("limit", "stream", tr, "stream-1m") in g}
# The limit of a workload: a Unix read's comes through our grown send
# buffer (for ours; the peers' do not grow theirs), a write's through
# the client's default one.
def limit_of(s, tr, wl):
    if tr == "unix" and wl == "seqread-1m" and s == "ours" and "unix-grown" in limit:
        return limit["unix-grown"]
    return limit.get(tr)
for tr, title in (("unix", "Unix socket"), ("tcp", "TCP, 127.0.0.1")):
    if not any(k[0] == "main" and k[2] == tr for k in g): continue
    print("### %s" % title)
    print()
    print("| server | workload | median | min–max | CPU µs/req | peak RSS MiB | ours ÷ this server | % of stream limit |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for wl in order:
        ours = ("main", "ours", tr, wl)
        if ours not in g: continue
        for s in servers:
            k = ("main", s, tr, wl)
            if k not in g: continue
            unit = g[k][0][1]
            ratio = "%.3f" % (med(ours) / med(k)) if med(k) else ""
            lim = "%.0f%%" % (100 * med(k) / limit_of(s, tr, wl)) \
                  if wl.startswith("seq") and limit_of(s, tr, wl) else ""
            if lim and s == "ours" and limit_of(s, tr, wl) != limit[tr]:
                lim += " (%.0f%% of unix)" % (100 * med(k) / limit[tr])
            print("| %s | %s | %s %s | %s | %.2f | %.0f | %s | %s |" % (
                s, names[wl], num(med(k)), unit, rng(k), med(k, 2),
                max(x[3] for x in g[k]) / 1024, ratio, lim))
    print()
print("CPU µs/req: the server's utime+stime (+cutime+cstime of reaped")
print("children: nbd-server forks one per connection) from /proc/PID/stat,")
print("%s Hz ticks, over the requests fio counted (nbdcopy: the export's" % hz)
print("size / 256 KiB, its --request-size).  Peak RSS: VmHWM of the server")
print("plus its live children, the largest over the rounds.  The memory plugin")
print("holds the data in the server's RSS; qemu-nbd and nbd-server keep it in")
print("tmpfs, which is not in theirs.  Ratio: median ours ÷ median of the")
print("row's server (for latency, below 1 is ours faster).")
print()
if limit:
    print("### The limit: one stream of 1 MiB writes")
    print()
    print("| transport | median MiB/s | min–max |")
    print("|---|---:|---|")
    for tr in ("unix", "unix-grown", "tcp"):
        k = ("limit", "stream", tr, "stream-1m")
        if k in g: print("| %s | %.0f | %s |" % (tr, med(k), rng(k)))
    print()
    if "unix-grown" in limit:
        print("unix-grown: the writer's send buffer grown as ours grows its own")
        print("on a Unix connection: the limit for our 1 MiB reads (for them the %")
        print("column also gives the share of plain unix).  Writes and the peers'")
        print("reads are against plain unix: the client's buffer and theirs keep")
        print("the default.")
        print()
if E["REPORT_LIMIT_NOTE"]:
    print(E["REPORT_LIMIT_NOTE"]); print()
sc = sorted({k[1] for k in g if k[0] == "conns"})
if sc:
    print("### Scaling with connections: 4K randread QD8 per connection, Unix socket")
    print()
    print("| server | connections | IOPS median | min–max | CPU µs/req |")
    print("|---|---:|---:|---|---:|")
    for s in sc:
        for c in (1, 2, 4, 8):
            k = ("conns", s, "unix", "conns-%d" % c)
            if k in g:
                print("| %s | %d | %.0f | %s | %.2f |" % (s, c, med(k), rng(k), med(k, 2)))
    print()
tk = sorted((int(k[1].split("-t")[1]), k) for k in g if k[0] == "threads")
if tk:
    print("### Scaling with worker threads (-t): ours, 4K randread QD32, one connection, Unix socket")
    print()
    print("| -t | IOPS median | min–max | CPU µs/req |")
    print("|---:|---:|---|---:|")
    for t, k in tk:
        print("| %d | %.0f | %s | %.2f |" % (t, med(k), rng(k), med(k, 2)))
    print()
if mem:
    print("### Memory plugin RSS")
    print()
    print("| server | what | VmRSS before MiB | VmRSS after MiB | growth − written MiB |")
    print("|---|---|---:|---:|---:|")
    for m in mem:
        if m[1] == "sparse-1T":
            print("| %s | memory 1T, no write yet | %.1f | | |" % (m[0], int(m[2]) / 1024))
        else:
            b, a = int(m[2]) / 1024, int(m[3]) / 1024
            print("| %s | memory 1G, 256 MiB random written by nbdcopy | %.1f | %.1f | %+.1f (%+.1f%%) |" % (
                m[0], b, a, a - b - 256, 100 * (a - b - 256) / 256))
    print()
    print("Goal for ours: growth within 2% + a few MiB of what was written.")
    print()
if E["REPORT_CHECK"]:
    margin = int(E["REPORT_CHECK"])
    behind = 0
    print("### Check: ours against each peer, margin %d%%" % margin)
    print()
    print("| transport | workload | peer | ours | peer | ours ÷ peer | verdict |")
    print("|---|---|---|---:|---:|---:|---|")
    for tr in ("unix", "tcp"):
        for wl in order:
            ours = ("main", "ours", tr, wl)
            if ours not in g: continue
            for s in servers:
                k = ("main", s, tr, wl)
                if s == "ours" or k not in g or not med(k): continue
                r = med(ours) / med(k)
                if wl.startswith("lat-"):
                    bad = r > 1 + margin / 100
                else:
                    bad = r < 1 - margin / 100
                behind += bad
                print("| %s | %s | %s | %s | %s | %.3f | %s |" % (
                    tr, names[wl], s, num(med(ours)), num(med(k)), r,
                    "**BEHIND**" if bad else "ok"))
    print()
    print("Latency rows: lower is better, so ours ÷ peer above 1 + margin is behind.")
    print()
    open(E["REPORT_CHECK_FILE"], "w").write("%d\n" % behind)
PY
{
  cat "$work/report.md"
  echo "Commands:"
  echo
  echo '```'
  echo "$cmdline   # from the source tree; build: $build"
  echo "# per workload (RW BS QD JOBS): randread 4k 32 1 | randwrite 4k 32 1 | randread 4k 8 4 |"
  echo "#   read 1M 8 1 | write 1M 8 1 | randread 4k 1 1 (clat p50/p99) | scaling: randread 4k 8 C"
  echo "fio --name=bench --ioengine=nbd --uri=URI --rw=RW --bs=BS --iodepth=QD --numjobs=JOBS --group_reporting --runtime=$runtime --time_based --norandommap --randrepeat=0 --output-format=json"
  echo "nbdcopy --request-size=$copy_request /dev/shm/.../source.img URI   # $size from /dev/urandom"
  echo "nbdcopy --request-size=$copy_request URI null:"
  echo "bench/unix-stream-limit unix|unix-grown|tcp $runtime   # built by cc -O2 -pthread from bench/unix-stream-limit.c"
  for s in "${servers[@]}"; do echo "# $s: ${srv_cmd[$s]}"; done
  case "$tls" in
    psk) echo "# TLS: ours, nbdkit: --tls=require --tls-psk=KEYS.psk; qemu-nbd: --object tls-creds-psk,id=tls0,endpoint=server,dir=DIR --tls-creds tls0"
         echo "# URI: nbds+unix://alice@/[bench]?socket=SOCK&tls-psk-file=KEYS.psk or nbds://alice@127.0.0.1:PORT/[bench]?tls-psk-file=KEYS.psk" ;;
    x509) echo "# TLS: ours, nbdkit: --tls=require --tls-certificates=DIR; qemu-nbd: --object tls-creds-x509,id=tls0,endpoint=server,dir=DIR,verify-peer=off --tls-creds tls0"
          echo "# URI: nbds+unix:///[bench]?socket=SOCK&tls-certificates=CLIENTDIR or nbds://127.0.0.1:PORT/[bench]?tls-certificates=CLIENTDIR" ;;
    *) echo "# URI: nbd+unix:///[bench]?socket=SOCK or nbd://127.0.0.1:PORT/[bench]" ;;
  esac
  [ -n "$tls" ] && echo "# fio runs with LD_PRELOAD=bench/libnbd-allow-local.so (see its header)"
  echo '```'
  echo
  echo "Raw samples (phase server transport workload round value unit cpu-µs/req peak-RSS-KiB requests):"
  echo
  echo '```'
  cat "$work/data"
  echo '```'
} >"$work/section.md"
cat "$work/section.md"

if [ "$write_results" -eq 1 ]; then
  write_section "$section_title" "$work/section.md"
  python3 "$srcdir/bench/current-standing.py" "$srcdir/bench/RESULTS.md" \
    >"$work/current.md" || die "bench/current-standing.py failed"
  write_section "Current standing" "$work/current.md" top
fi
if [ -n "$check" ]; then
  behind="$(cat "$work/check-behind")"
  if [ "$behind" -gt 0 ]; then
    echo "$0: $behind row(s) fell more than $check% behind a peer" >&2
    exit 3
  fi
  note "every row within $check% of each peer or ahead"
fi
