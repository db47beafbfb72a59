#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/python.sh: the python plugin host, ours beside Debian's nbdkit
# 1.32 python plugin, serving the same script: a bytearray of --size
# MiB (API_VERSION 2, THREAD_MODEL_PARALLEL, pread copying a slice of
# the bytearray into the server's buffer, pwrite the reverse).
#
# Each round gives each server a fresh slot, in an order that rotates
# from round to round: fio (ioengine=nbd) 4 KiB random read at QD32,
# then nbdcopy of the export to null: (whole export, default request
# size and connections, --no-extents: the memory plugin's unwritten
# export would otherwise be skipped as holes, never read).  Around each run the server's CPU time comes
# from /proc/PID/stat.  The same workloads against the memory plugin of
# each server (a C plugin doing the same copies) give the cost of the
# interpreter per request: the python plugin's CPU µs per request minus
# the memory plugin's.  As root with bpftrace, one more traced run of
# ours gives the time inside the interpreter per pread from the
# plugin's python_call_done probe.
#
# Prints a markdown report of medians, ours ÷ Debian's on every row.
#
#   bench/python.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--quick] [--build DIR]
#
# Defaults: 3 rounds, 5 s per fio run, a 512 MiB bytearray.  --quick: 1
# round of 2 s on 128 MiB (a smoke test).  --build: our built tree
# (default: this source tree, if built; else $BENCH_BUILD).  Needs fio
# with its nbd engine, nbdcopy, python3, and Debian's /usr/bin/nbdkit
# with its python plugin (exit 77 without them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=5 size_mib=512 quick=0
build="${BENCH_BUILD:-$srcdir}"
cmdline="bench/python.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
[ "$quick" -eq 1 ] && rounds=1 runtime=2 size_mib=128
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib"

command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
for c in nbdcopy python3 timeout; do
  command -v $c >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
[ -x /usr/bin/nbdkit ] &&
  [ -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-python-plugin.so ] ||
  { echo "$0: Debian's nbdkit python plugin not installed" >&2; exit 77; }
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -f "$build/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  die "$build has no built python plugin"

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-python.XXXXXX")"
pids=()
srv_pid=
cleanup ()
{
  local p
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work"
}
trap_cleanup
clk_tck="$(getconf CLK_TCK)"

cat > "$work/disk.py" <<'EOF'
import nbdkit

API_VERSION = 2
disk = None

def config(key, value):
    global disk
    if key == "size":
        disk = bytearray(nbdkit.parse_size(value))

def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL

def open(readonly):
    return 1

def get_size(h):
    return len(disk)

def pread(h, buf, offset, flags):
    buf[:] = disk[offset:offset + len(buf)]

def pwrite(h, buf, offset, flags):
    disk[offset:offset + len(buf)] = buf
EOF

# start SERVER PLUGIN: a fresh server on a private socket.
start ()
{
  local bin="$1" sock="$work/sock"
  rm -f "$sock" "$work/pid"
  case "$2" in
    python) "$bin" -f -U "$sock" -P "$work/pid" python "$work/disk.py" \
              size="${size_mib}M" 2>"$work/server.err" & ;;
    memory) "$bin" -f -U "$sock" -P "$work/pid" memory "${size_mib}M" \
              2>"$work/server.err" & ;;
  esac
  srv_pid=$!
  local i
  for (( i = 0; i < 200; i++ )); do
    [ -s "$work/pid" ] && [ -S "$sock" ] && break
    sleep 0.1
  done
  [ -S "$sock" ] || die "$bin $2 did not start: $(cat "$work/server.err")"
  srv_uri="nbd+unix:///?socket=$sock"
}

stop () { kill_pid "$srv_pid"; wait "$srv_pid" 2>/dev/null || :; srv_pid=; }

# run NAME PLUGIN ROUND: the two workloads; lines "name plugin workload
# round value cpu-µs/req" in $work/data.
run ()
{
  local name="$1" plugin="$2" rnd="$3" t0 t1 s0 s1
  local bin="$build/nbdkit"
  [ "$name" = ours ] || bin=/usr/bin/nbdkit
  start "$bin" "$plugin"
  t0="$(cpu_ticks "$srv_pid")"
  bounded $(( runtime + 60 )) "$work/fio.err" \
    fio --name=bench --ioengine=nbd --uri="$srv_uri" --rw=randread --bs=4k \
      --iodepth=32 --numjobs=1 --runtime="$runtime" --time_based \
      --norandommap --randrepeat=0 --output-format=json \
      --output="$work/fio.json" ||
    die "fio failed on $name $plugin: $(tail -3 "$work/fio.err")"
  t1="$(cpu_ticks "$srv_pid")"
  python3 - "$work/fio.json" "$name" "$plugin" "$rnd" $(( t1 - t0 )) \
    "$clk_tck" >>"$work/data" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
name, plugin, rnd, ticks, hz = sys.argv[2:7]
reqs = j["total_ios"]
print(name, plugin, "randread-4k", rnd, j["iops"],
      int(ticks) / int(hz) * 1e6 / max(reqs, 1))
PY
  t0="$(cpu_ticks "$srv_pid")"
  s0="$(date +%s.%N)"
  bounded $(( size_mib / 10 + 120 )) "$work/copy.err" \
    nbdcopy --no-extents "$srv_uri" null: ||
    die "nbdcopy failed on $name $plugin: $(tail -3 "$work/copy.err")"
  s1="$(date +%s.%N)"
  t1="$(cpu_ticks "$srv_pid")"
  # nbdcopy's default request is 256 KiB.
  python3 -c "
import sys
s = $s1 - $s0
reqs = $size_mib * 4
print('$name $plugin copy-out $rnd', $size_mib / s, $(( t1 - t0 )) / $clk_tck * 1e6 / reqs)
" >>"$work/data"
  stop
}

note "rounds $rounds, $runtime s fio runs, ${size_mib} MiB bytearray"
slots=("ours python" "debian python" "ours memory" "debian memory")
for (( r = 1; r <= rounds; r++ )); do
  for (( i = 0; i < ${#slots[@]}; i++ )); do
    slot="${slots[$(( (i + r - 1) % ${#slots[@]} ))]}"
    note "round $r: $slot"
    run $slot "$r"
  done
done

# With bpftrace (as root): the time spent inside the interpreter per
# pread, from the plugin's own python_call_done probe, over one more fio
# run on ours (traced, so a little slower than the rows above).
: > "$work/probe"
so="$build/plugins/python/.libs/nbdkit-python-plugin.so"
if [ "$(id -u)" = 0 ] && command -v bpftrace >/dev/null &&
   readelf -n "$so" 2>/dev/null | grep -q python_call_done; then
  note "probe run: python_call_done on ours"
  start "$build/nbdkit" python
  timeout -k 5 $(( runtime + 90 )) bpftrace -e "
    usdt:$so:nbdkit:python_call_done /pid == $srv_pid && str(arg2) == \"pread\"/ {
      @ns = avg(arg3); @n = count(); }" \
    > "$work/bt.out" 2> "$work/bt.err" &
  bt=$!
  pids+=("$bt")
  for (( i = 0; i < 600; i++ )); do
    grep -qs Attaching "$work/bt.out" "$work/bt.err" && break
    sleep 0.1
  done
  sleep 2
  bounded $(( runtime + 60 )) "$work/fio.err" \
    fio --name=bench --ioengine=nbd --uri="$srv_uri" --rw=randread --bs=4k \
      --iodepth=32 --numjobs=1 --runtime="$runtime" --time_based \
      --norandommap --randrepeat=0 --output-format=json \
      --output="$work/fio.json" || die "fio failed under bpftrace"
  kill -INT "$bt" 2>/dev/null || :
  wait "$bt" 2>/dev/null || :
  # bpftrace prints its maps at exit: "@n: COUNT", "@ns: AVERAGE".
  echo "probe $(awk '$1 == "@n:" { print $2 }' "$work/bt.out")" \
    "$(awk '$1 == "@ns:" { print $2 }' "$work/bt.out")" > "$work/probe"
  stop
fi

python3 - "$work/data" "$cmdline" "$rounds" "$runtime" "$size_mib" \
  "$(nproc)" "$work/probe" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
cmdline, rounds, runtime, size, ncpu = sys.argv[2:7]
g = {}
for name, plugin, wl, rnd, value, cpu in rows:
    g.setdefault((name, plugin, wl), []).append((float(value), float(cpu)))
med = lambda k, i: st.median(x[i] for x in g[k])
units = {"randread-4k": "IOPS", "copy-out": "MiB/s"}
titles = {"randread-4k": "fio 4 KiB randread QD32",
          "copy-out": "nbdcopy --no-extents export → null:"}
print("## Python plugin host")
print()
print("`%s`: %s round(s), %s s fio runs, a %s MiB bytearray, %s CPUs." %
      (cmdline, rounds, runtime, size, ncpu))
print()
print("| workload | plugin | ours | Debian nbdkit 1.32 | ours ÷ Debian | CPU µs/req ours | CPU µs/req Debian |")
print("|---|---|---:|---:|---:|---:|---:|")
for wl in ("randread-4k", "copy-out"):
    for plugin in ("python", "memory"):
        o, d = ("ours", plugin, wl), ("debian", plugin, wl)
        if o not in g or d not in g: continue
        print("| %s | %s | %.0f %s | %.0f %s | %.2f | %.2f | %.2f |" % (
            titles[wl], plugin, med(o, 0), units[wl], med(d, 0), units[wl],
            med(o, 0) / med(d, 0), med(o, 1), med(d, 1)))
print()
print("Cost of the interpreter per request: CPU µs/req of the python plugin")
print("minus that of the memory plugin (a C plugin), same server, same workload.")
print()
print("| workload | ours | Debian nbdkit 1.32 |")
print("|---|---:|---:|")
for wl in ("randread-4k", "copy-out"):
    try:
        c = [med((n, "python", wl), 1) - med((n, "memory", wl), 1)
             for n in ("ours", "debian")]
    except KeyError:
        continue
    print("| %s | %.2f µs | %.2f µs |" % (titles[wl], c[0], c[1]))
probe = open(sys.argv[7]).read().split()
if len(probe) == 3 and int(probe[1]) > 0:
    print()
    print("Inside the interpreter, from the python_call_done probe (ours, one")
    print("traced fio 4 KiB randread QD32 run): %s preads, %.2f µs each on" %
          (probe[1], int(probe[2]) / 1000))
    print("average, from taking the GIL to dropping it.")
PY
