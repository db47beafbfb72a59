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
#
# For each build it runs the server under callgrind twice: with a
# client that connects and sends N 4 KiB reads, and with one that sends
# none; the difference divided by N is the instructions per request.
# --noprobes (a --disable-probes build) gives what the probes cost;
# --base (an earlier build with probes) what a change added.  The
# server runs with --busy-poll=0 and one worker: busy-polling spins a
# varying number of times and the pool's timing samples vary, which
# moved the count by about 80 instructions per request between runs of
# the same binary; without them repeated runs give the same count.
# Prints a markdown table.  Needs valgrind and Debian's python3-libnbd.
set -euo pipefail

probes= noprobes= base= n=5000
while [ $# -gt 0 ]; do
  case "$1" in
    --probes) probes=$2; shift 2 ;;
    --noprobes) noprobes=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    *) echo "usage: $0 --probes DIR [--noprobes DIR] [--base DIR] [-n N]" >&2
       exit 1 ;;
  esac
done
[ -n "$probes" ] && { [ -n "$noprobes" ] || [ -n "$base" ]; } ||
  { echo "$0: --probes and --noprobes or --base are required" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "$0: valgrind is needed" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/probe-instr.XXXXXX")
server=
cleanup () {
  [ -n "$server" ] && kill "$server" 2>/dev/null || :
  rm -rf "$work"
}
trap cleanup EXIT

# Instructions executed by BUILD's server while a client sends $2 reads.
count ()
{
  local b=$1 reads=$2 sock="$work/sock" i
  rm -f "$work"/cg.* "$sock"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
    "$b/server/nbdkit" -f -U "$sock" --busy-poll=0 -t 1 \
    "$b/plugins/memory/.libs/nbdkit-memory-plugin.so" 64M \
    > "$work/vg.log" 2>&1 &
  server=$!
  for (( i = 0; i < 300; i++ )); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { cat "$work/vg.log" >&2; exit 1; }
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
  awk '/^summary:/ { print $2 }' "$work"/cg.*
}

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
