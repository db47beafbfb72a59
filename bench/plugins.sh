#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/plugins.sh: our plugins beside Debian's nbdkit 1.32 running
# the same command, in one run.
#
# Read plugins: data, pattern, full, sparse-random and split serve an
# export of --size MiB (data: a repeated 8-byte group filling it; split:
# four files of random bytes in /dev/shm; sparse-random: its defaults
# with seed=1); in each slot a fresh server runs fio (ioengine=nbd) 4
# KiB random read at QD32, fio 1 MiB sequential read at QD8, then
# nbdcopy of the export to null:.  file and "file cache=none" serve a
# file of --file-size MiB of random bytes in --file-dir, which must be
# on a disk (not tmpfs), dropped from the page cache before each of
# their runs, so that both servers start cold; their sequential read is
# one pass over the file (what cache=none is for: a copy or a backup,
# where a time-based run would mostly measure which server left the
# file cached), and their rows add the MiB of the file left in the page
# cache once the slot's server has stopped (what cache=none promises to
# keep low).  The zero plugin's export is empty,
# so its row is the rate of handshakes (connect, negotiate, disconnect,
# one client process).  Slots rotate between the two servers from round
# to round.  A plugin that our build tree has not built yet is skipped
# with a note in the report, not an error.
#
# Memory: "memory allocator=zstd" on both servers: fio writes --zstd-size
# MiB of compressible data (3 in 4 bytes compress away) sequentially in
# 1 MiB blocks, then the server's resident size is read (VmRSS and its
# peak VmHWM, /proc/PID/status), then fio 4 KiB random writes at QD32
# of the same kind of data give the write IOPS, and the peak once more.
#
# Prints a markdown report, medians of the rounds, ours ÷ nbdkit on every
# row; --write-results also puts it in bench/RESULTS.md as the section
# "## Plugins" (other sections kept).
#
#   bench/plugins.sh [--rounds N] [--runtime SECONDS] [--size MiB]
#        [--zstd-size MiB] [--file-size MiB] [--file-dir DIR]
#        [--plugins LIST] [--quick] [--build DIR] [--write-results]
#
# Defaults: 3 rounds, 3 s per fio run, read exports of 512 MiB, 1024
# MiB written for zstd, a file of 1024 MiB in /var/tmp.  --plugins
# runs only the rows of the comma-separated LIST (of data pattern full
# zero sparse-random split file file-nocache memory-zstd; file-nocache
# is file cache=none); such a partial run cannot --write-results.
# --quick: 1 round of 1 s runs of pattern and
# zero (4 KiB random read and copy-out only) and zstd with 64 MiB (a
# smoke test).  --build: our built tree (default $BENCH_BUILD or
# /tmp/build-bench).  Needs fio with its nbd engine, nbdcopy, nbdinfo,
# python3 with the nbd module, and Debian's /usr/bin/nbdkit (exit 77
# without fio or Debian's nbdkit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH="/usr/bin:$PATH"
export LC_ALL=C

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
rounds=3 runtime=3 size_mib=512 zstd_mib=1024 quick=0 write_results=0
file_mib=1024 file_dir=/var/tmp sel_plugins=""
build="${BENCH_BUILD:-/tmp/build-bench}"
cmdline="bench/plugins.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --runtime) runtime="$2"; shift 2 ;;
    --size) size_mib="$2"; shift 2 ;;
    --zstd-size) zstd_mib="$2"; shift 2 ;;
    --file-size) file_mib="$2"; shift 2 ;;
    --file-dir) file_dir="$2"; shift 2 ;;
    --plugins) sel_plugins="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --write-results) write_results=1; shift ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
[ "$quick" -eq 1 ] && rounds=1 runtime=1 size_mib=64 zstd_mib=64
need_counts --rounds "$rounds" --runtime "$runtime" --size "$size_mib" \
  --zstd-size "$zstd_mib" --file-size "$file_mib"
[ -n "$sel_plugins" ] && [ "$write_results" -eq 1 ] &&
  die "--write-results needs a full run (no --plugins)"
build="$(cd "$build" 2>/dev/null && pwd)" || die "no build directory $build"
[ -x "$build/nbdkit" ] || die "$build/nbdkit is not built"
command -v fio >/dev/null || { echo "$0: fio not found" >&2; exit 77; }
[ -x /usr/bin/nbdkit ] || { echo "$0: Debian's nbdkit not found" >&2; exit 77; }
fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd ioengine"
for c in nbdcopy nbdinfo python3 fincore; do
  command -v "$c" >/dev/null || die "$c not found"
done
python3 -c 'import nbd' 2>/dev/null || die "python3 has no nbd module"
debian_plugindir=/usr/lib/x86_64-linux-gnu/nbdkit/plugins

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-plugins.XXXXXX")"
shm="$(mktemp -d /dev/shm/bench-plugins.XXXXXX)"
pids=() srv_pid=""
cleanup ()
{
  local status=$? p
  set +e
  [ -n "$srv_pid" ] && kill_pid "$srv_pid"
  for p in "${pids[@]}"; do kill_pid "$p"; done
  rm -rf "$work" "$shm"
  [ -n "${file_img:-}" ] && rm -f "$file_img"
  exit $status
}
trap_cleanup

size=$(( size_mib * 1024 * 1024 ))
file_size=$(( file_mib * 1024 * 1024 ))
all_plugins=(data pattern full zero sparse-random split file file-nocache
             memory-zstd)
if [ "$quick" -eq 1 ]; then
  plugins=(pattern zero memory-zstd)
  workloads=(randread-4k copy-out)
else
  plugins=("${all_plugins[@]}")
  workloads=(randread-4k seqread-1m copy-out)
fi
if [ -n "$sel_plugins" ]; then
  plugins=()
  for p in ${sel_plugins//,/ }; do
    [[ " ${all_plugins[*]} " == *" $p "* ]] ||
      die "--plugins: unknown \"$p\" (one of: ${all_plugins[*]})"
    plugins+=("$p")
  done
fi
servers=(ours nbdkit)
: > "$work/data"
: > "$work/skipped"

# Plugins missing from either side are left out, with a note.
present=() zstd=0
for p in "${plugins[@]}"; do
  so="${p%-nocache}"
  if [ "$p" = memory-zstd ]; then
    zstd=1
  elif [ ! -e "$build/plugins/$so/.libs/nbdkit-$so-plugin.so" ]; then
    echo "$p: not built in our tree yet" >> "$work/skipped"
  elif [ ! -e "$debian_plugindir/nbdkit-$so-plugin.so" ]; then
    echo "$p: Debian's nbdkit has no $so plugin here" >> "$work/skipped"
  else
    present+=("$p")
  fi
done
plugins=("${present[@]}")
if [ "$zstd" -eq 0 ]; then
  :
elif ! "$build/nbdkit" memory 1M allocator=zstd --run true >/dev/null 2>&1; then
  echo "memory allocator=zstd: not available in our build" >> "$work/skipped"
  zstd=0
elif ! /usr/bin/nbdkit memory 1M allocator=zstd --run true >/dev/null 2>&1
then
  echo "memory allocator=zstd: not available in Debian's nbdkit" \
    >> "$work/skipped"
  zstd=0
fi

# The split plugin's files: four of random bytes, a quarter each.
for i in 1 2 3 4; do
  [[ " ${plugins[*]} " == *" split "* ]] || break
  head -c $(( size / 4 )) /dev/urandom > "$shm/split$i.img"
done

# The file plugin's file: on a disk, its pages dropped before each slot.
file_img=""
if [[ " ${plugins[*]} " == *" file"* ]]; then
  [ -d "$file_dir" ] || die "--file-dir $file_dir is not a directory"
  [ "$(stat -f -c %T "$file_dir")" != tmpfs ] ||
    die "--file-dir $file_dir is on tmpfs: the file rows need a disk"
  file_img="$(mktemp "$file_dir/bench-plugins-file.XXXXXX")"
  note "making the $file_mib MiB file $file_img"
  head -c "$file_size" /dev/urandom > "$file_img"
fi
# uncache_file: written back, then out of the page cache.
uncache_file ()
{
  python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$file_img"
}

# plugin_args PLUGIN: the command's plugin and parameters, one a line.
plugin_args ()
{
  case "$1" in
    file) printf '%s\n' file "$file_img" ;;
    file-nocache) printf '%s\n' file "$file_img" cache=none ;;
    data) printf '%s\n' data "(0x55 0xAA 0 1 2 3 0xFE 0xFF)*$(( size / 8 ))" ;;
    pattern|full) printf '%s\n' "$1" "$size" ;;
    zero) printf '%s\n' zero ;;
    sparse-random) printf '%s\n' sparse-random "$size" seed=1 ;;
    split) printf '%s\n' split "$shm"/split{1,2,3,4}.img ;;
    memory-zstd) printf '%s\n' memory "$(( zstd_mib * 1024 * 1024 ))" \
                   allocator=zstd ;;
  esac
}

# start_server SERVER PLUGIN: sets srv_pid and srv_uri.
start_server ()
{
  local name="$1" plugin="$2" bin=/usr/bin/nbdkit i args
  local sock="$work/sock" pidfile="$work/pid" log="$work/server.log"
  [ "$name" = ours ] && bin="$build/nbdkit"
  mapfile -t args < <(plugin_args "$plugin")
  rm -f "$sock" "$pidfile"
  "$bin" -f -U "$sock" -P "$pidfile" "${args[@]}" > "$log" 2>&1 &
  pids+=("$!")
  srv_uri="nbd+unix:///?socket=$sock"
  # The data plugin parses its whole expression first: allow a while.
  for (( i = 0; i < 1200; i++ )); do
    [ -s "$pidfile" ] && break
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  srv_pid="$(cat "$pidfile" 2>/dev/null)" ||
    die "$name $plugin: no pid file: $(tail -3 "$log")"
  timeout 10 nbdinfo --size "$srv_uri" > /dev/null ||
    die "$name $plugin: not serving: $(tail -3 "$log")"
  local shown="${args[*]}"
  [ "${#shown}" -gt 100 ] && shown="${shown:0:100}..."
  echo "$name $plugin: $bin $shown" >> "$work/commands"
}

stop_server ()
{
  kill_pid "$srv_pid"
  srv_pid=""
}

# record KEY... VALUE UNIT: one line of $work/data.
record () { echo "$*" | tee -a "$work/data" >&2; }

# fio_run LOG ARGS...: fio on the server's export, JSON in $work/run.json.
fio_run ()
{
  local log="$1"
  shift
  bounded $(( runtime + 120 )) "$log" \
    fio --name=bench --ioengine=nbd --uri="$srv_uri" --numjobs=1 \
      --output-format=json --output="$work/run.json" "$@" ||
    die "fio $* failed: $(tail -3 "$log")"
}

# fio_value FIELD: iops or bw (MiB/s), reads and writes summed.
fio_value ()
{
  python3 - "$work/run.json" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if sys.argv[2] == "iops":
    print(round(j["read"]["iops"] + j["write"]["iops"]))
else:
    print(round((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 2**20, 1))
PY
}

# measure SERVER PLUGIN WORKLOAD ROUND: on an export of $exp_size
# bytes ($exp_mib MiB).
measure ()
{
  local name="$1" plugin="$2" wl="$3" rnd="$4" t0 t1
  case "$wl" in
    randread-4k)
      fio_run "$work/fio.err" --rw=randread --bs=4k --iodepth=32 \
        --size="$exp_size" --runtime="$runtime" --time_based --norandommap \
        --randrepeat=0
      record "$plugin $wl $name $rnd $(fio_value iops) IOPS" ;;
    seqread-1m)
      fio_run "$work/fio.err" --rw=read --bs=1m --iodepth=8 \
        --size="$exp_size" --runtime="$runtime" --time_based
      record "$plugin $wl $name $rnd $(fio_value bw) MiB/s" ;;
    seqread-1m-once)
      fio_run "$work/fio.err" --rw=read --bs=1m --iodepth=8 \
        --size="$exp_size"
      record "$plugin $wl $name $rnd $(fio_value bw) MiB/s" ;;
    copy-out)
      t0="$(date +%s.%N)"
      bounded $(( exp_mib / 10 + 120 )) "$work/copy.err" \
        nbdcopy "$srv_uri" null: ||
        die "nbdcopy failed: $(tail -3 "$work/copy.err")"
      t1="$(date +%s.%N)"
      record "$plugin $wl $name $rnd" \
        "$(python3 -c "print(round($exp_mib / ($t1 - $t0), 1))") MiB/s" ;;
    handshakes)
      bounded $(( runtime + 60 )) "$work/hs.out" \
        python3 "$work/handshakes.py" "$srv_uri" "$runtime" ||
        die "handshakes failed: $(tail -3 "$work/hs.out")"
      record "$plugin $wl $name $rnd $(tail -1 "$work/hs.out") conn/s" ;;
  esac
}

# The handshake loop for the empty export (a file: bounded runs its
# command in the background, where stdin is /dev/null).
cat > "$work/handshakes.py" <<'PY'
import nbd, sys, time
uri, runtime = sys.argv[1], float(sys.argv[2])
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < runtime:
    h = nbd.NBD()
    h.connect_uri(uri)
    assert h.get_size() == 0
    h.shutdown()
    n += 1
print(round(n / (time.monotonic() - t0)))
PY

# kib FIELD: a field of the server's /proc/PID/status, in KiB.
kib ()
{
  awk -v k="$1:" '$1 == k { print $2 }' "/proc/$srv_pid/status"
}

# measure_zstd SERVER ROUND
measure_zstd ()
{
  local name="$1" rnd="$2"
  local compress=(--buffer_compress_percentage=75 --buffer_compress_chunk=4k
                  --refill_buffers)
  fio_run "$work/fio.err" --rw=write --bs=1m --iodepth=8 \
    --size="$(( zstd_mib * 1024 * 1024 ))" "${compress[@]}"
  record "zstd fill $name $rnd $(fio_value bw) MiB/s"
  record "zstd rss-after-fill $name $rnd" \
    "$(python3 -c "print(round($(kib VmRSS) / 1024, 1))") MiB"
  fio_run "$work/fio.err" --rw=randwrite --bs=4k --iodepth=32 \
    --size="$(( zstd_mib * 1024 * 1024 ))" --runtime="$runtime" --time_based \
    --norandommap --randrepeat=0 "${compress[@]}"
  record "zstd randwrite-4k $name $rnd $(fio_value iops) IOPS"
  record "zstd peak-rss $name $rnd" \
    "$(python3 -c "print(round($(kib VmHWM) / 1024, 1))") MiB"
}

note "rounds $rounds, runtime $runtime s, exports of $size_mib MiB," \
  "zstd $zstd_mib MiB, file $file_mib MiB; plugins: ${plugins[*]:-none}"
for (( rnd = 1; rnd <= rounds; rnd++ )); do
  order=("${servers[@]}")
  (( rnd % 2 == 0 )) && order=("${servers[1]}" "${servers[0]}")
  for plugin in "${plugins[@]}"; do
    for name in "${order[@]}"; do
      exp_size="$size" exp_mib="$size_mib"
      case "$plugin" in
        file*) exp_size="$file_size" exp_mib="$file_mib" ;;
      esac
      start_server "$name" "$plugin"
      if [ "$plugin" = zero ]; then
        measure "$name" zero handshakes "$rnd"
      else
        for wl in "${workloads[@]}"; do
          case "$plugin" in
            file*) uncache_file
                   [ "$wl" = seqread-1m ] && wl=seqread-1m-once ;;
          esac
          measure "$name" "$plugin" "$wl" "$rnd"
        done
      fi
      stop_server
      case "$plugin" in
        file*) record "$plugin resident $name $rnd" \
                 "$(fincore -b -n -o RES "$file_img" |
                    python3 -c "print(round(int(input()) / 2**20, 1))") MiB"
               ;;
      esac
      note "round $rnd: $plugin $name done"
    done
  done
  if [ "$zstd" -eq 1 ]; then
    for name in "${order[@]}"; do
      start_server "$name" memory-zstd
      measure_zstd "$name" "$rnd"
      stop_server
      note "round $rnd: memory allocator=zstd $name done"
    done
  fi
done

report="$work/report.md"
python3 - "$work/data" "$work/skipped" "$cmdline" "$(nproc)" \
  "$(ours_version)" \
  "$(/usr/bin/nbdkit --version | head -1)" "$(fio --version)" \
  "$rounds" "$runtime" "$size_mib" "$zstd_mib" "$file_mib" \
  "$( [ -n "$file_img" ] && df --output=source,fstype "$file_img" | tail -1)" \
  > "$report" <<'PY'
import statistics, sys
from collections import defaultdict
(data, skipped, cmdline, ncpu, ours, ref, fio, rounds, runtime, size,
 zsize, fsize, fdisk) = sys.argv[1:]
vals = defaultdict(list)
units = {}
order = []
for line in open(data):
    plugin, wl, server, rnd, value, unit = line.split()
    vals[(plugin, wl, server)].append(float(value))
    units[(plugin, wl)] = unit
    if (plugin, wl) not in order:
        order.append((plugin, wl))
med = {k: statistics.median(v) for k, v in vals.items()}
names = {"randread-4k": "4K randread QD32", "seqread-1m": "1M seqread QD8",
         "seqread-1m-once": "1M seqread QD8, one pass",
         "copy-out": "nbdcopy to null:", "handshakes": "handshakes",
         "randwrite-4k": "4K randwrite QD32", "fill": "1M write QD8 (fill)",
         "rss-after-fill": "VmRSS after fill", "peak-rss": "VmHWM (peak)",
         "resident": "file left in the page cache"}
# Where smaller is better, the ratio is still ours ÷ nbdkit (below 1
# is better there).
smaller = {"rss-after-fill", "peak-rss", "resident"}
plugin_names = {"zstd": "memory allocator=zstd",
                "file-nocache": "file cache=none"}
def row(plugin, wl):
    o = med.get((plugin, wl, "ours"))
    r = med.get((plugin, wl, "nbdkit"))
    if o is None or r is None:
        return
    u = units[(plugin, wl)]
    fmt = "%.0f" if u in ("IOPS", "conn/s") else "%.1f"
    first = plugin_names.get(plugin, plugin)
    what = names.get(wl, wl)
    if wl in smaller:
        what += " (lower is better)"
    print("| %s | %s | %s %s | %s %s | %s |" % (
        first, what,
        fmt % o, u, fmt % r, u, "%.2f" % (o / r) if r else "–"))
print("## Plugins")
print()
print("`%s` on %s CPUs; ours: %s; nbdkit: %s; %s.  %s rounds, %s s per fio"
      " run, read exports of %s MiB, %s MiB written for zstd; medians of the"
      " rounds, both servers run in turn in each round." % (
          cmdline, ncpu, ours.strip(), ref, fio, rounds, runtime, size, zsize))
if fdisk:
    print()
    print("file and file cache=none: a file of %s MiB of random bytes on %s,"
          " dropped from the page cache before each run; \"file left in"
          " the page cache\" is fincore's count once the slot's server has"
          " stopped." % (fsize, " ".join(fdisk.split())))
print()
print("| plugin | workload | ours | nbdkit | ours ÷ nbdkit |")
print("|---|---|---|---|---|")
for plugin, wl in order:
    if plugin != "zstd":
        row(plugin, wl)
if any(p == "zstd" for p, _ in order):
    print()
    print("### memory allocator=zstd")
    print()
    print("Compressible data (fio buffer_compress_percentage=75): resident"
          " size of the server after the fill, write rates, and the peak.")
    print()
    print("| plugin | workload | ours | nbdkit | ours ÷ nbdkit |")
    print("|---|---|---|---|---|")
    for plugin, wl in order:
        if plugin == "zstd":
            row(plugin, wl)
skips = [l.strip() for l in open(skipped) if l.strip()]
if skips:
    print()
    print("Skipped:")
    print()
    for s in skips:
        print("- " + s)
PY
cat "$report"
echo
echo "Commands:"
sort -u "$work/commands" 2>/dev/null | sed 's/^/    /'
[ "$write_results" -eq 1 ] && write_section "Plugins" "$report"
exit 0
