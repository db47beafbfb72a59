# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Helpers shared by the bench/ scripts (sourced, not run).  A script
# that uses bounded keeps the background pids it must clean up in the
# array "pids"; one that uses wait_children keeps its server in
# "srv_pid"; one that uses write_section sets "srcdir" to the source
# tree.

die () { echo "$0: $*" >&2; exit 1; }

# usage [STATUS]: print the script's header comment (from line 2 to the
# "set -euo" line) as its help, and exit with STATUS (default 0).
usage ()
{
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}

# unknown_argument ARG: say so, with the help, and exit 2.
unknown_argument ()
{
  echo "$0: unknown argument: $1" >&2
  usage 2 >&2
}

# need_counts OPTION VALUE ...: exit 2 unless each VALUE is a whole
# number from 1 up (OPTION names it in the message).
need_counts ()
{
  while [ $# -gt 1 ]; do
    case "$2" in ''|*[!0-9]*|0*)
      echo "$0: $1 takes a whole number from 1 up, not \"$2\"" >&2
      exit 2 ;;
    esac
    shift 2
  done
}

# trap_cleanup: run the script's cleanup function on every way out,
# with the conventional status for a signal.
trap_cleanup ()
{
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
}
note () { echo "# [$SECONDS s] $*" >&2; }   # progress, on stderr

# free_port: a TCP port on 127.0.0.1 that is free right now.
free_port ()
{
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stop PID: SIGTERM, then SIGKILL if it is still there after 5 s.
kill_pid ()
{
  local pid="$1" i
  kill "$pid" 2>/dev/null || return 0
  for (( i = 0; i < 50; i++ )); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || :
}

# The pids of PID's children (nbd-server forks one per connection).
children ()
{
  cat /proc/"$1"/task/*/children 2>/dev/null || :
}

# Wait up to SECS (default 5) for the server's children to exit.
wait_children ()
{
  local i limit=$(( ${1:-5} * 10 ))
  for (( i = 0; i < limit; i++ )); do
    [ -z "$(children "$srv_pid")" ] && return 0
    sleep 0.1
  done
}

# bounded LIMIT LOG CMD...: run CMD with its output in LOG, killed after
# LIMIT seconds; its exit status.
bounded ()
{
  local limit="$1" log="$2" pid status=0
  shift 2
  timeout -k 5 "$limit" "$@" >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait "$pid" || status=$?
  unset 'pids[${#pids[@]}-1]'
  return $status
}

# CPU time of PID and its reaped children, in clock ticks:
# utime + stime + cutime + cstime from /proc/PID/stat.
cpu_ticks ()
{
  local stat
  stat="$(cat "/proc/$1/stat")" || die "server $1 is gone"
  stat="${stat##*) }"                   # fields from 3 on
  set -- $stat
  echo $(( ${12} + ${13} + ${14} + ${15} ))   # fields 14 to 17
}

# write_section TITLE FILE [top]: put FILE (a section starting "## TITLE")
# into bench/RESULTS.md in place of the section of that title (up to
# the next "## "), keeping the rest; if absent, append it (or with
# "top", put it before the first "## " section).
write_section ()
{
  local results="$srcdir/bench/RESULTS.md"
  [ -f "$results" ] || printf '# Benchmark results\n\n' >"$results"
  python3 - "$results" "$2" "$1" "${3:-}" <<'PY'
import re, sys
path, new, title = sys.argv[1], open(sys.argv[2]).read().rstrip() + "\n", sys.argv[3]
top = sys.argv[4] == "top"
text = open(path).read()
m = re.search(r"^## " + re.escape(title) + r"\n.*?(?=^## (?!#)|\Z)", text,
              re.S | re.M)
first = re.search(r"^## ", text, re.M)
if m:
    text = text[:m.start()] + new + "\n" + text[m.end():]
elif top and first:
    text = text[:first.start()] + new + "\n" + text[first.start():]
else:
    text = text.rstrip() + "\n\n" + new
open(path, "w").write(text.rstrip() + "\n")
PY
  note "wrote the \"$1\" section of $results"
}

# Our server's version line with its own name and release, "$build" being
# the build tree: --version prints only what nbdkit prints, the server's
# name and release come from --dump-config.
ours_version ()
{
  "$build/nbdkit" --version | head -1 | tr -d '\n'
  "$build/nbdkit" --dump-config |
    awk -F= '$1 == "server" { n = $2 } $1 == "server_version" { v = $2 }
             END { printf " (%s %s)", n, v }'
}

# interleave FN SIDE...: for each of $rounds rounds and each of
# ${workloads[@]}, call FN SIDE WORKLOAD ROUND for every side, starting
# one side further along each round, so that no side always runs first
# (after a cold start) or last.
interleave ()
{
  local fn="$1" r wl k
  shift
  local sides=("$@")
  for (( r = 1; r <= rounds; r++ )); do
    for wl in "${workloads[@]}"; do
      for (( k = 0; k < ${#sides[@]}; k++ )); do
        "$fn" "${sides[$(( (k + r) % ${#sides[@]} ))]}" "$wl" "$r"
      done
    done
  done
}
