#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin against Debian's nbdkit ssh plugin, over a private
# sshd on 127.0.0.1 (started with tests/sshd-start.sh, so as root):
# nbdcopy of a file of random bytes out of the export (sequential
# reads) and into it (sequential writes), each server in turn, the
# order alternating each round; prints the median seconds and MB/s of
# each, and the ratio ours/Debian's (below 1: ours is faster).
#
#   bench/ssh.sh [--rounds N] [--size MIB] [--build DIR]
#
# --build: the configured and built tree to measure (default: the tree
# this script is in).  Needs root, /usr/sbin/sshd, nbdcopy, python3 and
# Debian's nbdkit with its ssh plugin.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"

rounds=5 size=128
build="$(cd "$here/.." && pwd)"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) unknown_argument "$1" ;;
  esac
done
need_counts --rounds "$rounds" --size "$size"
debian=/usr/sbin/nbdkit
[ -x "$debian" ] || debian=/usr/bin/nbdkit
"$debian" ssh --version >/dev/null 2>&1 || die "no Debian nbdkit ssh plugin"

# The tests' helpers give the sshd (and clean it up at exit).
abs_top_builddir="$build"
abs_top_srcdir="$(cd "$here/.." && pwd)"
srcdir="$abs_top_srcdir/tests"
set +u
source "$abs_top_srcdir/tests/functions.sh"
source "$abs_top_srcdir/tests/sshd-start.sh"
set -u
start_sshd
disk="$tmpdir/disk"
head -c $(( size * 1024 * 1024 )) /dev/urandom > "$disk"
cp "$disk" "$tmpdir/src"

declare -A times
run ()                          # run LABEL SERVER DIRECTION
{
  local label="$1" server="$2" dir="$3" start end cmd
  if [ "$dir" = read ]; then
    cmd="nbdcopy \"\$uri\" null:"
  else
    cmd="nbdcopy $tmpdir/src \"\$uri\""
  fi
  start=$EPOCHREALTIME
  timeout -k 5 600 "$server" -U - ssh "${sshd_args[@]}" "$disk" \
    --run "$cmd" || die "$label $dir failed"
  end=$EPOCHREALTIME
  times[$label.$dir]+="$(python3 -c "print($end - $start)") "
}

for (( r = 1; r <= rounds; r++ )); do
  note "round $r of $rounds"
  for dir in read write; do
    if (( r % 2 )); then
      run ours "$build/nbdkit" "$dir"; run debian "$debian" "$dir"
    else
      run debian "$debian" "$dir"; run ours "$build/nbdkit" "$dir"
    fi
  done
done

echo "# nbdcopy of $size MiB over SFTP to a local sshd, median of $rounds rounds"
printf '%-6s %-8s %8s %8s %12s\n' dir server seconds MB/s ours/debian
for dir in read write; do
  for label in ours debian; do
    python3 - "$dir" "$label" "$size" "${times[$label.$dir]}" \
      "${times[ours.$dir]}" "${times[debian.$dir]}" <<'PY'
import statistics, sys
d, label, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
med = lambda s: statistics.median(float(x) for x in s.split())
m, o, b = med(sys.argv[4]), med(sys.argv[5]), med(sys.argv[6])
ratio = "%.2f" % (o / b) if label == "ours" else ""
print("%-6s %-8s %8.2f %8.1f %12s" % (d, label, m, size * 1.048576 / m, ratio))
PY
  done
done
