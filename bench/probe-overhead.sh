#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/probe-overhead.sh: what the USDT probes cost.
#
#  1. Untraced: a build with probes against a build without them
#     (configure --disable-probes), the same fio workloads, alternating
#     builds in every round: 4 KiB random read QD32, 1 MiB sequential read
#     QD8, 4 KiB random write QD32.  Goal: no difference beyond 1%.
#  2. Traced: the probes build's 4 KiB random read with EVERY probe of
#     server/probes.d enabled (or those --trace-probes names), by perf
#     record (events made by tools/nbdkit-perf-events) and by bpftrace
#     (count()), each compared with untraced runs of the same round.
#
# Each server is the build's own ./nbdkit wrapper running the memory
# plugin on a private Unix socket in a private directory, pre-written so
# that reads hit data.  Server CPU time comes from /proc/PID/stat
# (utime+stime) around each fio run.  Prints a markdown report on stdout;
# --write-results also puts it in bench/RESULTS.md as the section
# "## Probe overhead" (other sections are kept).
#
#   bench/probe-overhead.sh [--rounds N] [--runtime SECONDS] [--quick]
#        [--probes DIR] [--noprobes DIR] [--no-trace]
#        [--trace-probes 'NAME ...'] [--write-results]
#
# --quick: 1 round of 1 s runs on a 128M export (a smoke test, < 60 s).
# Needs fio (3.33+: ioengine=nbd) and python3; tracing needs root, perf
# and bpftrace (a missing one is reported and its phase skipped).
# Builds: --probes (default $PROBES_BUILD or /tmp/build-probes) and
# --noprobes (default $NOPROBES_BUILD or /tmp/build-noprobes), each a
# configured and built out-of-tree build directory.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"    # libnbd tools, Debian's python3
export LC_ALL=C PERF_PAGER=cat

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5 runtime=5 size=1G quick=0 trace=1 write_results=0 trace_probes=""
probes_build="${PROBES_BUILD:-/tmp/build-probes}"
noprobes_build="${NOPROBES_BUILD:-/tmp/build-noprobes}"
cmdline="bench/probe-overhead.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --quick) quick=1 rounds=1 runtime=1 size=128M; shift ;;
    --probes) probes_build="$2"; shift 2 ;;
    --noprobes) noprobes_build="$2"; shift 2 ;;
    --no-trace) trace=0; shift ;;
    --trace-probes) trace_probes="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime"


command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
command -v python3 >/dev/null || { echo "$0: python3 not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
for b in "$probes_build" "$noprobes_build"; do
  [ -x "$b/nbdkit" ] && [ -x "$b/server/nbdkit" ] ||
    die "$b is not a built build directory (no ./nbdkit)"
done
has_probes () { grep -q '^#define ENABLE_PROBES 1' "$1/config.h"; }

# --- Cleanup: everything we start is killed on every exit path ---------

work="$(mktemp -d "${TMPDIR:-/tmp}/probe-overhead.XXXXXX")"
pids=()                 # servers and tracers we started
uprobe_group=""         # our private tracefs group, if we made one
tracefs=/sys/kernel/tracing
[ -d "$tracefs/events" ] || tracefs=/sys/kernel/debug/tracing

cleanup ()
{
  local status=$? p
  set +e
  for p in "${pids[@]}"; do kill_pid "$p"; done
  [ -n "$uprobe_group" ] && remove_uprobes
  [ -n "${KEEP_WORK:-}" ] && echo "# kept $work" >&2 || rm -rf "$work"
  exit $status
}
trap_cleanup

# --- Servers ---------------------------------------------------------------

# start_server LABEL BUILD: sets ${LABEL}_pid, ${LABEL}_uri.
start_server ()
{
  local label="$1" build="$2" i
  local sock="$work/$label.sock" pidfile="$work/$label.pid"
  # A private copy of the binary: tracers attached to the build's binary
  # by anyone else (uprobes and semaphores are per file) cannot touch it.
  cp "$build/server/nbdkit" "$work/$label-nbdkit"
  printf -v "${label}_bin" %s "$work/$label-nbdkit"
  NBDKIT_PLUGINDIR="$build/plugins" NBDKIT_FILTERDIR="$build/filters" \
    "$work/$label-nbdkit" -f -U "$sock" -P "$pidfile" memory "$size" \
    2>"$work/$label.log" &
  local pid=$!
  pids+=("$pid")
  for (( i = 0; i < 200; i++ )); do
    [ -s "$pidfile" ] && [ -S "$sock" ] && break
    kill -0 "$pid" 2>/dev/null || die "$label server died: $(cat "$work/$label.log")"
    sleep 0.1
  done
  [ -S "$sock" ] || die "$label server did not listen within 20 s"
  printf -v "${label}_pid" %s "$pid"
  printf -v "${label}_uri" %s "nbd+unix:///?socket=$sock"
}

# cpu_ticks PID: utime+stime of the whole process (dead threads included).
clk_tck="$(getconf CLK_TCK)"

# bounded SECONDS LOG CMD...: run CMD under timeout in the background and
# wait for it, so that a signal to this script is handled at once (bash
# runs traps only between foreground commands) and kills it too.

# fio_run URI RW BS QD OUT.json: one bounded fio run.
fio_run ()
{
  local uri="$1" rw="$2" bs="$3" qd="$4" out="$5"
  # No --ramp_time: fio's counts would leave out the ramp while the
  # server's CPU time and the tracers' counts include it.
  bounded $(( runtime + 60 )) "$out.err" \
    fio --name=bench --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
      --iodepth="$qd" --runtime="$runtime" --time_based --norandommap --randrepeat=0 \
      --output-format=json --output="$out" ||
    die "fio failed ($rw $bs QD$qd on $uri): $(tail -3 "$out.err")"
}

# One measured run: appends "phase build workload round value unit
# cpu_us_per_request ios" to $work/data.
declare -A wl_rw=([randread-4k]=randread [seqread-1m]=read
                  [randwrite-4k]=randwrite)
declare -A wl_bs=([randread-4k]=4k [seqread-1m]=1M [randwrite-4k]=4k)
declare -A wl_qd=([randread-4k]=32 [seqread-1m]=8 [randwrite-4k]=32)
measure ()
{
  local phase="$1" label="$2" wl="$3" round="$4"
  local pidvar="${label}_pid" urivar="${label}_uri" t0 t1
  local out="$work/$phase-$label-$wl-$round.json"
  t0="$(cpu_ticks "${!pidvar}")"
  fio_run "${!urivar}" "${wl_rw[$wl]}" "${wl_bs[$wl]}" "${wl_qd[$wl]}" "$out"
  t1="$(cpu_ticks "${!pidvar}")"
  python3 - "$out" "$phase" "$label" "$wl" "$round" $(( t1 - t0 )) \
    "$clk_tck" >>"$work/data" <<'PY'
import json, sys
out, phase, label, wl, rnd, ticks, hz = sys.argv[1:]
job = json.load(open(out))["jobs"][0]
d = job["write"] if "write" in wl else job["read"]
ios = d["total_ios"]
value, unit = (d["bw_bytes"] / 2**20, "MiB/s") if "seq" in wl \
              else (d["iops"], "IOPS")
cpu_us = int(ticks) * 1e6 / int(hz) / ios if ios else 0
print(phase, label, wl, rnd, "%.3f" % value, unit, "%.3f" % cpu_us, ios)
PY
  note "$(tail -1 "$work/data")"
}

prewrite ()
{
  local urivar="${1}_uri"
  bounded 300 "$work/$1-prewrite.err" \
    fio --name=prewrite --ioengine=nbd --uri="${!urivar}" \
      --rw=write --bs=1M --iodepth=8 --output="$work/$1-prewrite.json" ||
    die "pre-writing the $1 export failed: $(tail -3 "$work/$1-prewrite.err")"
}

# --- Probe sites, for the tracers --------------------------------------------

probe_names ()
{
  local p
  for p in $(sed -n 's/^[[:space:]]*probe[[:space:]]*\([a-z_0-9]*\)[[:space:]]*(.*/\1/p' \
               "$srcdir/server/probes.d"); do
    [ -z "$trace_probes" ] || [[ " $trace_probes " == *" $p "* ]] || continue
    echo "$p"
  done
}

# add_uprobes BINARY: perf events for the probes traced (all, or those
# --trace-probes names), in a private group, made by the tool operators
# use (tools/nbdkit-perf-events: semaphores, named and typed arguments).
add_uprobes ()
{
  uprobe_group="pbench$$"
  "$probes_build/tools/nbdkit-perf-events" --group "$uprobe_group" -q \
    add -b "$1" $(probe_names) >"$work/perf-events.out" 2>&1 ||
    die "nbdkit-perf-events add failed: $(tail -3 "$work/perf-events.out")"
  note "added perf events for $(probe_names | wc -l) probes in group $uprobe_group"
}
remove_uprobes ()
{
  "$probes_build/tools/nbdkit-perf-events" --group "$uprobe_group" -q del ||
    note "nbdkit-perf-events del failed"
  uprobe_group=""
}

# sem_addr PID BINARY: the semaphore of $sem_probe (request_done, or the
# last probe --trace-probes names) in the running server (link-time
# address + PIE load bias).
sem_addr ()
{
  local bin="$2" sem first base
  sem="$(readelf -n "$bin" | awk -v p="$sem_probe" '$2 == p { f = 1; next }
           f && /Semaphore:/ { print $NF; exit }')"
  first="$(readelf -l -W "$bin" | awk '$1 == "LOAD" { print $3; exit }')"
  base="$(awk -v b="$bin" '$6 == b && $3 == "00000000" {
            split($1, r, "-"); print "0x" r[1]; exit }' "/proc/$1/maps")"
  echo $(( base - (first & ~0xfff) + sem ))
}
sem_value ()
{
  dd if="/proc/$1/mem" bs=2 count=1 skip="$2" iflag=skip_bytes status=none |
    od -An -tu2 | tr -d ' '
}
# wait_sem PID ADDR WANT(nonzero|zero) SECONDS
wait_sem ()
{
  local i v
  for (( i = 0; i < $4 * 10; i++ )); do
    v="$(sem_value "$1" "$2")"
    if [ "$3" = nonzero ] && [ "$v" -gt 0 ]; then return 0; fi
    if [ "$3" = zero ] && [ "$v" -eq 0 ]; then return 0; fi
    sleep 0.1
  done
  return 1
}

# --- 1. Untraced: probes against no probes ----------------------------------

has_probes "$probes_build" ||
  note "warning: $probes_build was configured with --disable-probes"
has_probes "$noprobes_build" &&
  note "warning: $noprobes_build has probes enabled"
start_server probes "$probes_build"
start_server noprobes "$noprobes_build"
note "pre-writing $size on both servers"
prewrite probes
prewrite noprobes

workloads=(randread-4k seqread-1m randwrite-4k)
for (( r = 1; r <= rounds; r++ )); do
  if (( r % 2 )); then order=(probes noprobes); else order=(noprobes probes); fi
  for wl in "${workloads[@]}"; do
    for label in "${order[@]}"; do
      measure untraced "$label" "$wl" "$r"
    done
  done
done
kill_pid "$noprobes_pid"

# --- 2. Traced: every probe, by perf and by bpftrace -------------------------

trace_note=""
trace_perf=0 trace_bpf=0
if [ "$trace" -eq 1 ]; then
  bin="$probes_bin"
  if ! has_probes "$probes_build"; then
    trace_note="the probes build has probes disabled"
  elif [ "$(id -u)" -ne 0 ]; then
    trace_note="not root"
  else
    command -v perf >/dev/null && [ -w "$tracefs/uprobe_events" ] &&
      trace_perf=1
    command -v bpftrace >/dev/null && trace_bpf=1
    [ $trace_perf -eq 1 ] || trace_note+="perf or tracefs missing; "
    [ $trace_bpf -eq 1 ] || trace_note+="bpftrace missing; "
  fi
fi

if [ $trace_perf -eq 1 ] || [ $trace_bpf -eq 1 ]; then
  # No need for the test suite's tracing lock: our uprobes are in a
  # private group, on a private copy of the binary.
  sem_probe="$(probe_names | grep -x request_done || probe_names | tail -1)"
  sem="$(sem_addr "$probes_pid" "$bin")"
  [ "$(sem_value "$probes_pid" "$sem")" -eq 0 ] ||
    die "$sem_probe semaphore is $(sem_value "$probes_pid" "$sem") before any tracer: someone traces $bin"
  if [ $trace_perf -eq 1 ]; then
    add_uprobes "$bin"
  fi
  # BEGIN runs once every probe is attached: our readiness signal.
  { echo 'BEGIN { printf("ready\n"); }'
    echo "interval:s:$(( runtime + 120 )) { exit(); }"
    for p in $(probe_names); do
      echo "usdt:$bin:nbdkit:$p { @[\"$p\"] = count(); }"
    done; } >"$work/all.bt"

  for (( r = 1; r <= rounds; r++ )); do
    for tracer in perf bpftrace; do
      [ $tracer = perf ] && [ $trace_perf -eq 0 ] && continue
      [ $tracer = bpftrace ] && [ $trace_bpf -eq 0 ] && continue
      measure untraced-$tracer probes randread-4k "$r"
      out="$work/$tracer-$r.out"
      if [ $tracer = perf ]; then
        timeout -k 60 $(( runtime + 120 )) \
          perf record -q -e "$uprobe_group:*" -p "$probes_pid" \
            -o "$work/perf-$r.data" >"$out" 2>&1 &
      else
        # Not under timeout(1): its -k would kill bpftrace while it
        # detaches 50-odd uprobes, before it prints the counts.  The
        # program bounds itself (interval ... exit()).
        bpftrace "$work/all.bt" >"$out" 2>&1 &
      fi
      tpid=$!
      pids+=("$tpid")
      wait_sem "$probes_pid" "$sem" nonzero 60 ||
        die "$tracer did not enable the probes within 60 s: $(tail -5 "$out")"
      if [ $tracer = bpftrace ]; then
        for (( i = 0; i < 600; i++ )); do
          grep -q '^ready$' "$out" && break
          kill -0 "$tpid" 2>/dev/null || break
          sleep 0.1
        done
        grep -q '^ready$' "$out" ||
          die "bpftrace did not attach within 60 s: $(tail -5 "$out")"
      else
        sleep 1         # perf enables its events one by one
      fi
      measure $tracer probes randread-4k "$r"
      t0="$(date +%s)"
      kill -INT "$tpid" 2>/dev/null || :
      for (( i = 0; i < 1200; i++ )); do
        kill -0 "$tpid" 2>/dev/null || break
        sleep 0.1
      done
      kill_pid "$tpid"
      wait "$tpid" 2>/dev/null || :
      note "$tracer stopped in $(( $(date +%s) - t0 )) s"
      wait_sem "$probes_pid" "$sem" zero 30 ||
        die "the $sem_probe semaphore stayed set after $tracer exited"
      if [ $tracer = perf ]; then
        bounded 300 "$work/perf-$r.script" \
          perf script -i "$work/perf-$r.data" -F event || :
        events="$(grep -c . "$work/perf-$r.script" || :)"
        rm -f "$work/perf-$r.script"
        rm -f "$work/perf-$r.data"
      else
        events="$(awk -F': ' '/^@\[/ { s += $2 } END { print s + 0 }' "$out")"
      fi
      echo "$tracer $r $events" >>"$work/events"
    done
  done
  [ -n "$uprobe_group" ] && remove_uprobes
fi
kill_pid "$probes_pid"

# --- Report ------------------------------------------------------------------

ver_fio="$(fio --version)"
ver_kernel="$(uname -r)"
ver_gcc="$(gcc --version 2>/dev/null | head -1)"
ver_perf="$(perf --version 2>/dev/null || echo none)"
ver_bpf="$(bpftrace --version 2>/dev/null || echo none)"
head_rev="$(git -C "$srcdir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$srcdir" status --porcelain 2>/dev/null | grep -c . || :)"
touch "$work/events"

python3 - "$work/data" "$work/events" <<PY >"$work/report.md"
import statistics as st, sys, collections
rows = [l.split() for l in open(sys.argv[1])]
events = collections.defaultdict(list)
for l in open(sys.argv[2]):
    t, r, n = l.split(); events[t].append(int(n))
g = collections.defaultdict(list)
rnds = collections.defaultdict(list)
for phase, label, wl, rnd, v, unit, cpu, ios in rows:
    g[(phase, label, wl)].append((float(v), unit, float(cpu), int(ios)))
    rnds[(phase, label, wl)].append(rnd)
def rounds_of(k): return rnds[k]
def med(k, i=0): return st.median(x[i] for x in g[k])
def rng(k, i=0):
    xs = [x[i] for x in g[k]]; return "%.0f–%.0f" % (min(xs), max(xs))
print("## Probe overhead")
print()
print("Date: $(date -u '+%Y-%m-%d %H:%M UTC'); fio: $ver_fio; kernel: $ver_kernel;")
print("gcc: $ver_gcc; perf: $ver_perf; bpftrace: $ver_bpf;")
print("git HEAD: $head_rev ($dirty uncommitted paths); $(nproc) CPUs.")
print("Rounds: $rounds, $runtime s per fio run; memory plugin $size, pre-written;")
print("Unix socket; builds alternate within each round.")
print()
print("### Untraced: probes build vs --disable-probes build")
print()
def paired(wl, i):
    # Ratio per round (the two builds ran back to back), then median.
    a = {x: v for x, v in zip(rounds_of(("untraced", "probes", wl)),
                              (y[i] for y in g[("untraced", "probes", wl)]))}
    b = {x: v for x, v in zip(rounds_of(("untraced", "noprobes", wl)),
                              (y[i] for y in g[("untraced", "noprobes", wl)]))}
    rs = [a[k] / b[k] for k in a if k in b and b[k]]
    return "%.3f (%.3f–%.3f)" % (st.median(rs), min(rs), max(rs)) if rs else ""
print("| build | workload | median | min–max | server CPU µs/req | probes / no-probes: medians | per-round ratio, median (min–max) | CPU/req per-round ratio |")
print("|---|---|---|---|---|---|---|---|")
for wl in ("randread-4k", "seqread-1m", "randwrite-4k"):
    for label in ("probes", "noprobes"):
        k = ("untraced", label, wl)
        if k not in g: continue
        unit = g[k][0][1]
        ratio = pr = pc = ""
        if label == "probes" and ("untraced", "noprobes", wl) in g:
            ratio = "%.3f" % (med(k) / med(("untraced", "noprobes", wl)))
            cr = med(k, 2) / med(("untraced", "noprobes", wl), 2)
            ratio += " (CPU/req %.3f)" % cr
            pr, pc = paired(wl, 0), paired(wl, 2)
        print("| %s | %s QD%s | %.0f %s | %s | %.2f | %s | %s | %s |" % (
            label, wl, {"randread-4k": 32, "seqread-1m": 8,
                        "randwrite-4k": 32}[wl],
            med(k), unit, rng(k), med(k, 2), ratio, pr, pc))
tr = [t for t in ("perf", "bpftrace") if ("untraced-" + t, "probes", "randread-4k") in g]
if tr:
    print()
    print("### Traced: %s enabled, 4 KiB random read QD32, probes build"
          % ("$trace_probes" and "probes $trace_probes" or "every probe"))
    print()
    print("| tracer | untraced IOPS (median, min–max) | traced IOPS (median, min–max) | traced / untraced | extra wall µs/req | server CPU µs/req untraced → traced | extra CPU µs/req | probe hits/req |")
    print("|---|---|---|---|---|---|---|---|")
    for t in tr:
        u = ("untraced-" + t, "probes", "randread-4k")
        x = (t, "probes", "randread-4k")
        iu, it = med(u), med(x)
        hits = ""
        if events[t]:
            ios = sum(v[3] for v in g[x])
            hits = "%.1f" % (sum(events[t]) / ios) if ios else ""
        print("| %s | %.0f (%s) | %.0f (%s) | %.3f | %.2f | %.2f → %.2f | %.2f | %s |" % (
            t, iu, rng(u), it, rng(x), it / iu, 1e6 / it - 1e6 / iu,
            med(u, 2), med(x, 2), med(x, 2) - med(u, 2), hits))
    print()
    print("Extra wall µs/req = 1/IOPS traced − 1/IOPS untraced (QD32: the")
    print("server's per-request pipeline time).  CPU µs/req = server")
    print("utime+stime (/proc/PID/stat, %s Hz ticks) / requests; uprobe traps" % "$clk_tck")
    print("and BPF programs run in the server's threads, so they show there.")
    print("Probe hits/req: events perf recorded, or the sum of bpftrace's")
    print("counts, over the requests of the traced runs.")
PY
{
  cat "$work/report.md"
  echo
  [ -n "$trace_note" ] && { echo "Tracing skipped: $trace_note"; echo; }
  echo "Commands:"
  echo
  echo '```'
  echo "$cmdline   # from the source tree, as root"
  echo "# builds: $probes_build, $noprobes_build"
  echo "# one measured run (RW/BS/QD per workload):"
  echo "fio --name=bench --ioengine=nbd --uri='nbd+unix:///?socket=SOCK' --rw=RW --bs=BS --iodepth=QD --runtime=$runtime --time_based --norandommap --randrepeat=0 --output-format=json"
  echo "# server: a copy of BUILD/server/nbdkit (NBDKIT_PLUGINDIR=BUILD/plugins) -f -U SOCK -P PIDFILE memory $size, pre-written by fio --rw=write --bs=1M --iodepth=8"
  echo "# perf: tools/nbdkit-perf-events --group pbenchPID add -b COPY-OF-BIN [PROBES] (every call site, semaphores, named arguments), then"
  echo "perf record -q -e 'pbenchPID:*' -p SERVER_PID -o perf.data"
  echo "# bpftrace: one line per probe of server/probes.d, e.g."
  echo "bpftrace -e 'usdt:COPY-OF-$probes_build/server/nbdkit:nbdkit:request_done { @[\"request_done\"] = count(); }'"
  echo '```'
  echo
  echo "Raw samples (phase build workload round value unit cpu-µs/req ios):"
  echo
  echo '```'
  cat "$work/data"
  echo '```'
} >"$work/section.md"
cat "$work/section.md"

[ "$write_results" -eq 0 ] || write_section "Probe overhead" "$work/section.md"
