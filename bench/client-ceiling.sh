#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/client-ceiling.sh: how close each server comes to the client's
# own ceiling at 4 KiB QD32, one connection, Unix socket (or TCP on
# 127.0.0.1 with --tcp), and how close its CPU per request comes to the
# kernel's floor.
#
# fio's nbd engine runs one thread per connection, and at 4 KiB QD32
# that thread can fill a CPU by itself; then no server can make it go
# faster, and a ratio against a peer says little on its own.  The
# ceiling is measured with bench/null-responder.c: an NBD server that
# stores nothing, answers at once and never sleeps, so fio never pays
# to wake it.  The same responder with --sleep waits in read like any
# server that does not spin, and the CPU it uses per request is the
# floor: the kernel's part (receiving, sending, sleeping and waking),
# which a server that waits in read for each batch of requests cannot
# go below.  (Over TCP on two CPUs the spinning responder takes CPU from
# fio and from the loopback's own work, so there it is a weak ceiling;
# the floor still holds.)  In every round, interleaved: the
# two responders, ours (the memory plugin of --build) and nbdkit
# (Debian's, if installed), each pre-written with 1 MiB writes, then
# fio 4 KiB randread and randwrite QD32.  Prints a markdown table of
# medians with the spread, the server's CPU per request, each server's
# share of the ceiling, and its IOPS and CPU per request against
# nbdkit's; --write-results also puts it in bench/RESULTS.md as the
# section "## Client ceiling" (with --tcp, "## Client ceiling, TCP";
# other sections are kept).
#
#   bench/client-ceiling.sh [--rounds N] [--runtime SECONDS] [--quick]
#        [--tcp] [--build DIR] [--write-results]
#
# --tcp: every server on a free port of 127.0.0.1, not a Unix socket.
# --quick: 1 round of 1 s runs on a 128M export (a smoke test).  The
# build (default $BENCH_BUILD or /tmp/build-bench) is a configured and
# built build directory.  Needs cc, fio (ioengine=nbd) and python3.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"    # libnbd tools, Debian's python3
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5 runtime=4 size=1G size_mib=1024 write_results=0 tcp=0
build="${BENCH_BUILD:-/tmp/build-bench}"
cmdline="bench/client-ceiling.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --quick) rounds=1 runtime=1 size=128M size_mib=128; shift ;;
    --tcp) tcp=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --runtime "$runtime"

for c in cc fio python3; do
  command -v "$c" >/dev/null || { echo "$0: $c not found" >&2; exit 77; }
done
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
[ -x "$build/server/nbdkit" ] || die "$build is not a built build directory"
servers=(ceiling floor ours)
peer_nbdkit=/usr/bin/nbdkit
[ -x "$peer_nbdkit" ] && servers+=(nbdkit)

work="$(mktemp -d "${TMPDIR:-/tmp}/client-ceiling.XXXXXX")"
note "work directory: $work"
pids=()
srv_pid=""
cleanup ()
{
  local status=$? p
  set +e
  for p in "${pids[@]}" $srv_pid; do kill_pid "$p"; done
  [ -n "${KEEP_WORK:-}" ] && echo "# kept $work" >&2 || rm -rf "$work"
  exit $status
}
trap_cleanup

cc -O2 -I "$srcdir/common" -o "$work/null-responder" \
  "$srcdir/bench/null-responder.c" 2>"$work/cc.err" ||
  die "cannot build null-responder: $(cat "$work/cc.err")"
hz="$(getconf CLK_TCK)"

# listening: true once the server's socket or port takes connections.
listening ()
{
  if [ "$tcp" -eq 1 ]; then
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
  else
    [ -S "$sock" ]
  fi
}

# start NAME: the server NAME on $work/NAME.sock, or with --tcp on a
# free port of 127.0.0.1; sets srv_pid, uri.
start ()
{
  local name="$1" i cmd addr where
  sock="$work/$1.sock"
  rm -f "$sock"
  if [ "$tcp" -eq 1 ]; then
    port="$(free_port)"
    where="$port" addr=(-i 127.0.0.1 -p "$port")
    uri="nbd://127.0.0.1:$port"
  else
    where="$sock" addr=(-U "$sock")
    uri="nbd+unix:///?socket=$sock"
  fi
  case "$name" in
    ceiling) cmd=("$work/null-responder" "$where" $(( size_mib << 20 ))) ;;
    floor) cmd=("$work/null-responder" --sleep "$where"
                $(( size_mib << 20 ))) ;;
    ours) cmd=(env NBDKIT_PLUGINDIR="$build/plugins"
               NBDKIT_FILTERDIR="$build/filters"
               "$build/server/nbdkit" -f "${addr[@]}" memory "$size") ;;
    nbdkit) cmd=("$peer_nbdkit" -f "${addr[@]}" memory "$size") ;;
  esac
  "${cmd[@]}" 2>"$work/$name.log" &   # env execs: $! is the server
  srv_pid=$!
  for (( i = 0; i < 200; i++ )); do
    listening && break
    kill -0 "$srv_pid" 2>/dev/null || die "$name died: $(cat "$work/$name.log")"
    sleep 0.05
  done
  listening || die "$name did not listen within 10 s"
  note "server $name pid $srv_pid"
}

# fio_run RW OUT: one bounded 4 KiB QD32 fio run against $uri.
fio_run ()
{
  bounded $(( runtime + 60 )) "$2.err" \
    fio --name=bench --ioengine=nbd --uri="$uri" --rw="$1" --bs=4k \
      --iodepth=32 --size="$size" --runtime="$runtime" --time_based \
      --norandommap --randrepeat=0 --output-format=json --output="$2" ||
    die "fio $1 failed on $uri: $(tail -3 "$2.err")"
}

: > "$work/data"
for (( r = 1; r <= rounds; r++ )); do
  # Rotate the order each round, so no server always goes first.
  order=("${servers[@]:r % ${#servers[@]}}" "${servers[@]:0:r % ${#servers[@]}}")
  for name in "${order[@]}"; do
    start "$name"
    bounded 120 "$work/fill.err" \
      fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1M \
        --iodepth=8 --size="$size" --output-format=terse ||
      die "fio fill failed on $name: $(tail -3 "$work/fill.err")"
    for rw in randread randwrite; do
      out="$work/$name-$rw-$r.json"
      t0="$(cpu_ticks "$srv_pid")"
      fio_run "$rw" "$out"
      t1="$(cpu_ticks "$srv_pid")"
      python3 - "$out" "$name" "$rw" $(( t1 - t0 )) "$hz" \
        >>"$work/data" <<'PY'
import json, sys
path, name, rw, ticks, hz = sys.argv[1:6]
text = open(path).read()
job = json.loads(text[text.index("{"):])["jobs"][0]
d = job["read" if rw == "randread" else "write"]
ios = d["total_ios"] or 1
print(name, rw, "%.0f" % d["iops"], "%.2f" % (int(ticks) * 1e6 / int(hz) / ios))
PY
      note "round $r $name $rw $(tail -1 "$work/data" | cut -d' ' -f3) IOPS"
    done
    kill_pid "$srv_pid"
    srv_pid=""
  done
done

if [ "$tcp" -eq 1 ]; then
  title="Client ceiling, TCP" transport="TCP on 127.0.0.1"
else
  title="Client ceiling" transport="Unix socket"
fi
python3 - "$work/data" "$rounds" "$runtime" "$size" "$cmdline" \
  "$(cd "$srcdir" && git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(fio --version)" "$("$peer_nbdkit" --version 2>/dev/null | head -1 || :)" \
  "$title" "$transport" >"$work/report" <<'PY'
import statistics, sys, time
data, rounds, runtime, size, cmdline, head, fio, nbdkit, title, transport = \
    sys.argv[1:11]
rows = {}
for line in open(data):
    name, rw, iops, cpu = line.split()
    rows.setdefault((name, rw), []).append((float(iops), float(cpu)))
med = lambda xs: statistics.median(xs)
print("## %s\n" % title)
print("Date: %s; git HEAD: %s; %s; %s." %
      (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), head, fio,
       nbdkit or "nbdkit not installed"))
print("Rounds: %s, %s s per fio run, %s export, one connection, %s;"
      " servers interleaved, the order rotating each round.\n" %
      (rounds, runtime, size, transport))
print("| server | workload | IOPS median | min–max | CPU µs/req | ÷ ceiling | IOPS ÷ nbdkit | CPU ÷ nbdkit |")
print("|---|---|---:|---|---:|---:|---:|---:|")
names = [n for n in ("ceiling", "floor", "ours", "nbdkit")
         if (n, "randread") in rows]
for rw in ("randread", "randwrite"):
    top = med([x[0] for x in rows[("ceiling", rw)]])
    peer = rows.get(("nbdkit", rw))
    peer = (med([x[0] for x in peer]), med([x[1] for x in peer])) if peer else None
    for n in names:
        xs = rows[(n, rw)]
        m, cpu = med([x[0] for x in xs]), med([x[1] for x in xs])
        print("| %s | 4K %s QD32 | %.0f | %.0f–%.0f | %.2f | %.3f | %s | %s |" %
              (n, rw, m, min(x[0] for x in xs), max(x[0] for x in xs),
               cpu, m / top,
               "%.3f" % (m / peer[0]) if peer else "n/a",
               "%.3f" % (cpu / peer[1]) if peer else "n/a"))
print("""
ceiling: bench/null-responder.c (zeroes read, writes forgotten, never
sleeps); floor: the same with --sleep (waits in read); ours: the memory
plugin; nbdkit: its memory plugin.  CPU µs/req: the server's
utime+stime over the requests fio counted (the ceiling's is a whole
CPU spent spinning, the floor's the least a server that sleeps costs).

```
%s
fio --name=fill --ioengine=nbd --uri=URI --rw=write --bs=1M --iodepth=8 --size=%s
fio --name=bench --ioengine=nbd --uri=URI --rw=randread|randwrite --bs=4k --iodepth=32 --size=%s --runtime=%s --time_based --norandommap --randrepeat=0 --output-format=json
```""" % (cmdline, size, size, runtime))
PY
cat "$work/report"
[ "$write_results" -eq 1 ] && write_section "$title" "$work/report"
exit 0
