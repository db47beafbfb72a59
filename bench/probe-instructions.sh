#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/probe-instructions.sh: what compiled-in, untraced probes cost,
# counted in instructions rather than seconds.  callgrind counts every
# user-space instruction the server executes, the same count on every
# run whatever else the machine is doing, so a difference of a few
# instructions per request shows up where wall-clock benchmarks on a
# shared machine drown it in noise.
#
#   bench/probe-instructions.sh --probes BUILDDIR [--noprobes BUILDDIR]
#                               [--base BUILDDIR] [-n N]
#   bench/probe-instructions.sh --check [--probes BUILDDIR] [--baseline FILE]
#   bench/probe-instructions.sh --update-baseline [--probes BUILDDIR]
#                               [--baseline FILE] [-n N]
#
# For each build it runs the server under callgrind twice: with a
# client that connects and sends N 4 KiB reads, and with one that sends
# none; the difference divided by N is the instructions per request.
# --noprobes (a --disable-probes build) gives what the probes cost;
# --base (an earlier build with probes) what a change added.  The
# server runs with --busy-poll=0 and one worker: busy-polling spins a
# varying number of times and the pool's timing samples vary, which
# moved the count by about 80 instructions per request between runs of
# the same binary; without them repeated runs agree within an
# instruction or two per request.  It runs private copies of the
# server and the plugin, which no tracer attached to the build's files
# can touch.  Prints a markdown table.
#
# --check is the CI guard (tests/test-probe-instructions.sh): it counts
# the build (default: the source tree, built in place) with the N of
# the baseline (default tests/probe-instructions.baseline) and exits 1
# when the count per request is more than the baseline's tolerance
# above the baseline's figure, 77 when the build is not configured as
# the baseline's was (probes, CFLAGS: the figure depends on them).
# --update-baseline records the build's count as the new baseline: run
# it, from a tree configured with the defaults and built, whenever a
# change means to cost more (or saved some), and commit the file.
# Needs valgrind and Debian's python3-libnbd.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

srcdir="$(cd "$(dirname "$0")/.." && pwd)"
probes= noprobes= base= n= mode=table
baseline="$srcdir/tests/probe-instructions.baseline"
while [ $# -gt 0 ]; do
  case "$1" in
    --probes) probes=$2; shift 2 ;;
    --noprobes) noprobes=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --check) mode=check; shift ;;
    --update-baseline) mode=update; shift ;;
    -n) n=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
[ -z "$n" ] || need_counts -n "$n"
if [ "$mode" = table ]; then
  [ -n "$probes" ] && { [ -n "$noprobes" ] || [ -n "$base" ]; } ||
    { echo "$0: --probes and --noprobes or --base are required" >&2; exit 1; }
else
  probes=${probes:-$srcdir}
fi
command -v valgrind >/dev/null ||
  { echo "$0: SKIP: valgrind is needed" >&2; exit 77; }
/usr/bin/python3 -c 'import nbd' 2>/dev/null ||
  { echo "$0: SKIP: Debian's python3-libnbd is needed" >&2; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/probe-instr.XXXXXX")
server=
cleanup () {
  [ -n "$server" ] && kill_pid "$server"
  rm -rf "$work"
}
trap_cleanup

# Instructions executed by BUILD's server while a client sends $2 reads.
count ()
{
  local b=$1 reads=$2 sock="$work/sock" i
  rm -f "$work"/cg.* "$sock"
  cp "$b/server/nbdkit" "$work/nbdkit"
  cp "$b/plugins/memory/.libs/nbdkit-memory-plugin.so" "$work/memory.so"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
    "$work/nbdkit" -f -U "$sock" --busy-poll=0 -t 1 "$work/memory.so" 64M \
    > "$work/vg.log" 2>&1 &
  server=$!
  for (( i = 0; i < 300; i++ )); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { cat "$work/vg.log" >&2; die "the server did not listen"; }
  timeout 300 /usr/bin/python3 - "$sock" "$reads" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_unix(sys.argv[1])
for i in range(int(sys.argv[2])):
    h.pread(4096, (i * 7 * 4096) % (64 * 1024 * 1024))
h.shutdown()
PY
  kill "$server"; wait "$server" 2>/dev/null || :
  server=
  if [ -n "$own" ]; then
    own_instructions "$work"/cg.*
  else
    awk '/^summary:/ { print $2 }' "$work"/cg.*
  fi
}

# The instructions executed in the server binary and the plugin
# themselves (self cost by object in the callgrind file), leaving out
# the shared libraries: glibc picks its memcpy and string functions by
# the CPU's features, so their count differs between machines while
# our code's does not.  The guard counts this.
own_instructions ()
{
  python3 - "$1" "$work/nbdkit" "$work/memory.so" <<'PY'
import re, sys
path, ours = sys.argv[1], set (sys.argv[2:])
names, ob, skip, n = {}, None, False, 0
for line in open (path):
    if line.startswith (("ob=", "cob=", "calls=")):
        key, _, val = line.rstrip ("\n").partition ("=")
        if key == "calls":
            skip = True            # the next cost line is the call's, inclusive
            continue
        m = re.match (r"\((\d+)\)(?: (.*))?$", val)
        if m and m.group (2) is not None:
            names[m.group (1)] = m.group (2)
        v = names[m.group (1)] if m else val
        if key == "ob":
            ob = v
        continue
    if line[:1].isdigit () or line[:1] in "+-*":
        if skip:
            skip = False
        elif ob in ours:
            n += int (line.split ()[1])
print (n)
PY
}

# Instructions per request of BUILD for $2 reads.
per_request ()
{
  local with without
  with=$(count "$1" "$2")
  without=$(count "$1" 0)
  echo $(( (with - without) / $2 ))
}

# What the count depends on besides the code: probes compiled in or
# not, and the compiler flags.
build_config ()
{
  local p=no
  grep -q '^#define ENABLE_PROBES 1' "$1/config.h" && p=yes
  echo "probes=$p cflags=$(sed -n 's/^CFLAGS = //p' "$1/Makefile")"
}

# field NAME: the value of "NAME VALUE..." in the baseline file.
field () { sed -n "s/^$1 //p" "$baseline" | head -1; }

own=
case $mode in
check|update) own=1 ;;
esac

case $mode in
check)
  [ -f "$baseline" ] || die "no baseline file $baseline"
  want=$(field per_request) reads=$(field reads) tol=$(field tolerance_percent)
  [ -n "$want" ] && [ -n "$reads" ] && [ -n "$tol" ] ||
    die "$baseline lacks per_request, reads or tolerance_percent"
  config=$(build_config "$probes")
  if [ "$config" != "$(field build)" ]; then
    echo "$0: SKIP: the build is \"$config\", the baseline counts \"$(field build)\"" >&2
    exit 77
  fi
  got=$(per_request "$probes" "$reads")
  awk -v g="$got" -v w="$want" -v t="$tol" -v r="$reads" 'BEGIN {
    printf "instructions per 4 KiB read (%d reads): %d; baseline %d (%+.2f%%, limit +%s%%)\n",
           r, g, w, 100 * (g - w) / w, t
    if (g > w * (1 + t / 100)) {
      print "FAIL: the request path grew; if that is meant, re-record with"
      print "  bench/probe-instructions.sh --update-baseline"
      exit 1
    }
    if (g < w * (1 - t / 100))
      print "(well below the baseline: re-record it to keep the guard tight)"
  }'
  ;;
update)
  reads=${n:-2000} tol=2
  [ ! -f "$baseline" ] || tol=$(field tolerance_percent)
  got=$(per_request "$probes" "$reads")
  rev=$(git -C "$srcdir" rev-parse --short HEAD 2>/dev/null || echo unknown)
  dirty=$(git -C "$srcdir" status --porcelain -uno 2>/dev/null | grep -c . || :)
  cat > "$baseline" <<EOF
# The untraced server's user-space instructions per 4 KiB read, the
# figure tests/test-probe-instructions.sh guards: callgrind's Ir in the
# server binary and the memory plugin themselves (not the shared
# libraries, whose string functions vary with the CPU) for a connection
# sending "reads" sequential 4 KiB reads, minus one sending none,
# divided by "reads" (server: --busy-poll=0 -t 1).
# The test fails when a build counts more than tolerance_percent above
# per_request, and skips a build configured unlike "build".  Re-record
# on purpose, from a tree configured with the defaults and built, with
#   bench/probe-instructions.sh --update-baseline
# and commit this file.
per_request $got
reads $reads
tolerance_percent $tol
build $(build_config "$probes")
recorded $(date -u '+%Y-%m-%d %H:%M UTC') at $rev ($dirty uncommitted paths); $(gcc --version | head -1); $(valgrind --version); glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
EOF
  echo "$baseline: per_request $got (reads $reads)"
  ;;
table)
  n=${n:-5000}
  echo "| build | instructions, $n reads | instructions, 0 reads | per request |"
  echo "|---|---:|---:|---:|"
  declare -A per
  for b in probes noprobes base; do
    dir=${!b}
    [ -n "$dir" ] || continue
    with=$(count "$dir" "$n")
    without=$(count "$dir" 0)
    per[$b]=$(( (with - without) / n ))
    echo "| $b | $with | $without | ${per[$b]} |"
  done
  echo
  [ -z "$noprobes" ] ||
    awk -v a="${per[probes]}" -v b="${per[noprobes]}" 'BEGIN {
      printf "probes compiled in, untraced: %+d instructions per request (%+.2f%%)\n",
             a - b, 100 * (a - b) / b }'
  [ -z "$base" ] ||
    awk -v a="${per[probes]}" -v b="${per[base]}" 'BEGIN {
      printf "against the base build: %+d instructions per request (%+.2f%%)\n",
             a - b, 100 * (a - b) / b }'
  ;;
esac
