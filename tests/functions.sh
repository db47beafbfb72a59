# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/functions.sh: helpers sourced by every tests/test-*.sh.
#
# What a test gets from here:
#   requires CMD [ARGS...]   run CMD; skip the test (exit 77) if it fails
#   requires_cmd NAME...     skip unless every NAME is on $PATH
#   requires_root            skip unless running as root
#   requires_probes          skip unless the server was built with probes
#   assert_tls_build          fail unless the server was built with TLS
#   cleanup_fn CMD [ARGS...] push a command run at exit (last pushed, first run)
#   $tmpdir                  a private directory, removed at exit
#   t CMD [ARGS...]          run CMD under a timeout ($TEST_CMD_TIMEOUT seconds)
#   start_server ARGS...     run "$NBDKIT -f -U $sock -P $pidfile ARGS" in the
#                            background, wait until it listens, kill it at exit;
#                            sets $sock, $pidfile, $server_pid and $uri
#   stop_server              stop the server started by start_server now
#   expect_fail CMD [ARGS]   succeed only if CMD fails (status != 0)
#   refuses RE ARGS...       succeed only if "$NBDKIT -U - ARGS --run true"
#                            exits 1 with one line on stderr matching RE
#                            and nothing on stdout (else return 1)
#   fail MESSAGE             print MESSAGE and exit 1
#   tracing_lock             serialise tests that use perf or bpftrace
#   requires_tracer [CMD...] requires_cmd bpftrace CMD..., requires_root,
#                            requires_probes, then tracing_lock: the
#                            preamble of a test that runs bpftrace
#   wait_for_output F RE PID wait (bounded) for a line matching RE in F
#   start_bpftrace SECS OUT ERR ARGS...  bpftrace ARGS in the background,
#                            attached when it returns; its pid in $bt
#   user_probe_program       a bpftrace program printing request_start
#                            and the user probe (nbdkit_probe)
#   run_bench NAME           bench/NAME.sh --quick on this build, its
#                            table in $tmpdir/out; bench_fail MESSAGE
#   trace_in_order F         the lines of F that start with a timestamp
#                            (bpftrace's nsecs), in time order, without it
#   skip_under_sanitizers WHY  skip (exit 77) in a sanitizer build
#   as_ordinary_user FILE... as_user=(setpriv ... uid 65534) when root,
#                            $dir writable by that user
#   install_to_destdir       make install into $tmpdir/inst; sets $dest,
#                            $prefix and $libdir (as configured)
#   requires_ceph            skip unless the ceph packages are installed;
#                            start (or reuse) the one-node test cluster of
#                            tests/ceph-cluster.sh and source its env
#                            (CEPH_CONF, CEPH_KEYRING, CEPH_ID, RBD_POOL,
#                            S3_ENDPOINT, S3_ACCESS_KEY, ...)
#
# Sanitizer builds: NBDKIT_SANITIZERS names the sanitizers compiled in
# ("address,undefined"); make check sets it in a tree configured with
# --enable-sanitizers (set it by hand for a tree built with -fsanitize
# in CFLAGS).  Then every instrumented process a test starts writes its
# reports to a private directory (ASAN_OPTIONS, UBSAN_OPTIONS log_path)
# and exits with status 66 on a report, and the test fails at exit if
# any report was written, even by a server killed at cleanup (the
# server exits normally on SIGTERM, so the leak checker runs).  A test
# that cannot work in such a build (valgrind) skips only through
# skip_under_sanitizers, whose message .ci/run counts.
#
# The environment comes from tests/Makefile.am (AM_TESTS_ENVIRONMENT):
# $NBDKIT is the build tree's ./nbdkit wrapper, $PATH puts the build tree
# and then /usr/bin first (Debian's python3 has the libnbd bindings that
# nbdsh needs), $abs_top_builddir and $srcdir point at the trees.  A test
# run by hand from the build tree's tests/ directory gets sane defaults.

set -e
set -u

# Tests never read the terminal.  Under make -j, GNU make hands stdin to
# one job and a dead pipe to the others, and tools that check for a
# pipe on stdin (perf script reads pipe-mode data from it) then fail.
exec </dev/null

: "${abs_top_builddir:=$(cd .. && pwd)}"
: "${top_builddir:=$abs_top_builddir}"
: "${srcdir:=$(cd "$(dirname "$0")" && pwd)}"
: "${abs_top_srcdir:=$(cd "$srcdir/.." && pwd)}"
: "${abs_builddir:=$abs_top_builddir/tests}"
: "${NBDKIT:=$abs_top_builddir/nbdkit}"
: "${TEST_CMD_TIMEOUT:=60}"
PATH="$abs_top_builddir:/usr/bin:$PATH"
export PATH NBDKIT abs_top_builddir top_builddir srcdir abs_top_srcdir abs_builddir

# The server binary itself (not the wrapper), for readelf, perf, bpftrace.
server_binary="$abs_top_builddir/server/nbdkit"

# Debian's prebuilt plugins, for the plugin ABI tests.
debian_plugindir=/usr/lib/x86_64-linux-gnu/nbdkit/plugins

fail ()
{
  echo "$0: FAIL: $*" >&2
  exit 1
}

# --- Cleanup stack --------------------------------------------------------

_cleanup_cmds=()

cleanup_fn ()
{
  local cmd
  printf -v cmd '%q ' "$@"
  _cleanup_cmds+=("$cmd")
}

_run_cleanups ()
{
  local status=$? i
  set +e
  for (( i = ${#_cleanup_cmds[@]} - 1; i >= 0; i-- )); do
    eval "${_cleanup_cmds[$i]}"
  done
  _cleanup_cmds=()
  _check_sanitizer_logs || status=1
  exit $status
}

# Sanitizer reports written by any process of this test: show them and
# fail.  Runs after the cleanups, so servers stopped there are counted.
_sanitizer_logdir=
_check_sanitizer_logs ()
{
  local f found=0
  [ -n "$_sanitizer_logdir" ] && [ -d "$_sanitizer_logdir" ] || return 0
  for f in "$_sanitizer_logdir"/*; do
    [ -s "$f" ] || continue
    found=1
    echo "$0: FAIL: sanitizer report in ${f##*/}:" >&2
    cat "$f" >&2
  done
  rm -rf "$_sanitizer_logdir"
  [ "$found" -eq 0 ]
}
trap _run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- Requirements ---------------------------------------------------------

requires ()
{
  if ! "$@" >/dev/null 2>&1; then
    echo "$0: SKIP: requirement failed: $*"
    exit 77
  fi
}

requires_cmd ()
{
  local c
  for c in "$@"; do
    if ! command -v "$c" >/dev/null 2>&1; then
      echo "$0: SKIP: $c not found"
      exit 77
    fi
  done
}

# The skip message names ENABLE_PROBES: .ci/run counts those skips of
# the --disable-probes build apart.
requires_probes ()
{
  requires grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"
}

# Fails (does not skip) a TLS test in a build without TLS.  (Not
# check_*: test-docs-examples.sh takes every check_* function for the
# check of a documented example.)
assert_tls_build ()
{
  [ "$("$NBDKIT" --dump-config | grep '^tls=')" = tls=yes ] ||
    fail "this build has no TLS (configure found no gnutls)"
}

requires_root ()
{
  if [ "$(id -u)" -ne 0 ]; then
    echo "$0: SKIP: needs root"
    exit 77
  fi
}

# Every test holds a shared lock for its whole run; a test that attaches
# perf or bpftrace upgrades it to exclusive with tracing_lock.  Tracers
# attached by binary path see every server started from that binary,
# and perf probe definitions are system-wide, so while a tracing test
# runs no other test may run.  flock drops the shared lock before taking
# the exclusive one, so two tracing tests cannot deadlock.
# What the test starts does not get fd 9 (t and start_server close it):
# a server that outlived its test would otherwise hold the lock and
# stall every tracing test after it.
exec 9>>"${TMPDIR:-/tmp}/nbdkit-tests.lock"
flock -s -w 300 9 || fail "could not take the test lock"

install_to_destdir ()
{
  dest="$tmpdir/inst"
  make -s -C "$abs_top_builddir" install DESTDIR="$dest" \
       > "$tmpdir/install.log" 2>&1 ||
    { tail -20 "$tmpdir/install.log"; fail "make install failed"; }
  prefix=$(sed -n 's/^prefix=//p' "$abs_top_builddir/nbdkit.pc")
  libdir=$(sed -n 's/^libdir=//p' "$abs_top_builddir/nbdkit.pc")
  libdir=${libdir/\$\{exec_prefix\}/$prefix}
}

# as_ordinary_user FILE...: set up for running servers and tools as an
# ordinary user: as root, as_user=(setpriv ... uid 65534) and the test
# directories opened to it; otherwise as_user=() (we already are one).
# $dir is a directory that user may write.  Skips (77) unless that user
# can read each FILE and run $NBDKIT.
as_ordinary_user ()
{
  as_user=()
  if [ "$(id -u)" -eq 0 ]; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$tmpdir"
    # Sanitizer reports of the servers must reach the test's directory.
    [ -z "$_sanitizer_logdir" ] || chmod 1777 "$_sanitizer_logdir"
  fi
  dir="$tmpdir/u"
  mkdir "$dir"
  chmod 777 "$dir"
  local f
  for f in "$@"; do
    "${as_user[@]}" test -r "$f" -a -x "$NBDKIT" ||
      { echo "$0: SKIP: the build tree is not readable by uid 65534"; exit 77; }
  done
}

skip_under_sanitizers ()
{
  if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
    echo "$0: SKIP (sanitizer build: $NBDKIT_SANITIZERS): $*"
    exit 77
  fi
}

# The Ceph cluster lives once per "make check" run: the first test that
# needs it starts it in $abs_builddir/ceph-cluster with the make running
# the tests as its owner (the cluster's watchdog stops it when that make
# exits), and later tests of the same run reuse it.  A test run by hand,
# with no make above it, starts a private cluster in $tmpdir and stops
# it at exit.  The flock makes concurrent tests start one cluster; the
# script and its daemons do not inherit the lock's fd.
requires_ceph ()
{
  local c dir owner= pid comm script="$abs_top_srcdir/tests/ceph-cluster.sh"
  for c in ceph-mon ceph-mgr ceph-osd radosgw ceph rbd; do
    if ! command -v "$c" >/dev/null 2>&1; then
      echo "$0: SKIP: $c not found (the ceph packages are not installed)"
      exit 77
    fi
  done
  pid=$PPID
  while [ "$pid" -gt 1 ] 2>/dev/null; do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || break
    if [ "$comm" = make ]; then owner=$pid; break; fi
    pid=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null) || break
  done
  if [ -z "$owner" ]; then
    dir="$tmpdir/ceph"
    cleanup_fn "$script" stop "$dir"
    "$script" start "$dir" --owner $$ 9>&- >&2 ||
      fail "the Ceph test cluster did not start"
  else
    dir="$abs_builddir/ceph-cluster"
    (
      flock -w 120 8 || { echo "$0: could not take $dir.lock" >&2; exit 1; }
      # Reuse the cluster only if this make run started it and it runs.
      if [ -f "$dir/env" ] && [ "$(cat "$dir/owner" 2>/dev/null)" = "$owner" ]
      then
        pid=$(awk '$1 == "mon.a" { print $2 }' "$dir/pids" 2>/dev/null)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then exit 0; fi
      fi
      "$script" stop "$dir" 8>&- 9>&-
      "$script" start "$dir" --owner "$owner" 8>&- 9>&- >&2 || exit 1
    ) 8>>"$dir.lock" ||
      fail "the Ceph test cluster did not start"
  fi
  # shellcheck disable=SC1091
  . "$dir/env"
}

tracing_lock ()
{
  flock -x -w 300 9 || fail "could not take the tracing lock"
}

requires_tracer ()
{
  requires_cmd bpftrace "$@"
  requires_root
  requires_probes
  tracing_lock
}

# wait_for_output FILE REGEX PID [SECONDS]: wait until FILE has a line
# matching the extended REGEX (a tracer saying it is attached, say);
# give up early if PID exits, or after SECONDS (default 30).
wait_for_output ()
{
  local file=$1 regex=$2 pid=$3 secs=${4:-30} i
  for (( i = 0; i < secs * 10; i++ )); do
    grep -Eq "$regex" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -Eq "$regex" "$file" 2>/dev/null
}

# trace_in_order FILE: a tracer prints the events of different CPUs out
# of order; lines "NSECS rest" sorted by NSECS, printed as "rest".
trace_in_order ()
{
  grep -E '^[0-9]+ ' "$1" | sort -n -k1,1 | cut -d' ' -f2-
}

# The server under test must exist: a missing build is a failure, not a skip.
if [ ! -x "$NBDKIT" ]; then
  fail "NBDKIT=$NBDKIT is not executable (build the tree first)"
fi

# --- Temporary directory --------------------------------------------------

tmpdir="$(mktemp -d "${TMPDIR:-/tmp}/nbdkit-test.XXXXXX")"
[ -n "${KEEP_TMPDIR:-}" ] || cleanup_fn rm -rf "$tmpdir"

# --- Sanitizer builds -----------------------------------------------------

# Reports go to files (one per process), never to a stderr that a test
# may discard; a report makes the process exit 66.  The leak checker
# stays on.  User-set options come first and ours win.
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  _sanitizer_logdir="$(mktemp -d "${TMPDIR:-/tmp}/nbdkit-sanitizer.XXXXXX")"
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:halt_on_error=1:exitcode=66:log_path=$_sanitizer_logdir/asan"
  UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1:exitcode=66:log_path=$_sanitizer_logdir/ubsan"
  LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=66:print_suppressions=0:suppressions=$abs_top_srcdir/tests/lsan-suppressions.txt"
  export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS NBDKIT_SANITIZERS
fi

# --- Timeouts -------------------------------------------------------------

t ()
{
  timeout -k 5 "$TEST_CMD_TIMEOUT" "$@" 9>&-
}

expect_fail ()
{
  if "$@"; then
    echo "$0: expected failure, but it succeeded: $*" >&2
    return 1
  fi
  return 0
}

# --- A server that refuses its command line --------------------------------

# refuses RE ARGS...: run "$NBDKIT -U - ARGS --run true" and succeed only
# if it exits with status 1, prints nothing on stdout and one line on
# stderr, and that line matches the extended regex RE.  Otherwise show
# what it printed and return 1, so the caller picks fail or note_failure.
# A parameter error is reported before the server listens, so the one
# line says everything a user gets.
refuses ()
{
  local regex="$1" status=0
  shift
  t "$NBDKIT" -U - "$@" --run true \
    > "$tmpdir/refused.out" 2> "$tmpdir/refused.err" || status=$?
  if [ "$status" -eq 1 ] && [ ! -s "$tmpdir/refused.out" ] &&
     [ "$(wc -l < "$tmpdir/refused.err")" -eq 1 ] &&
     grep -Eq -- "$regex" "$tmpdir/refused.err"; then
    return 0
  fi
  echo "$0: $*: exit status $status, wanted 1 and one line matching" \
    "/$regex/; stdout:" >&2
  cat "$tmpdir/refused.out" >&2
  echo "stderr:" >&2
  cat "$tmpdir/refused.err" >&2
  return 1
}

# --- The bench scripts' smoke tests ---------------------------------------

# run_bench NAME: run bench/NAME.sh --quick against this build, for at
# most 120 s, its table in $tmpdir/out (shown) and its progress lines in
# $tmpdir/err; fail (bench_fail) if it exits non-zero.  The caller takes
# tracing_lock first: a bench loads both cores or times requests.
run_bench ()
{
  local bench="$abs_top_srcdir/bench/$1.sh" status=0
  [ -x "$bench" ] || fail "$bench is missing or not executable"
  TMPDIR="$tmpdir" timeout -k 5 120 "$bench" --quick \
    --build "$abs_top_builddir" > "$tmpdir/out" 2> "$tmpdir/err" ||
    status=$?
  cat "$tmpdir/out"
  [ "$status" -eq 0 ] || bench_fail "bench exited with $status"
}

# bench_fail MESSAGE: fail showing the bench's progress lines, which say
# where it was.
bench_fail ()
{
  echo "--- the bench's stderr:"
  cat "$tmpdir/err"
  fail "$@"
}

# --- A background server on a private socket ------------------------------

# Wait up to $1 (whole) seconds for test "$2" "$3" to be true.
wait_for ()
{
  local limit=$(( $1 * 10 )) i
  shift
  for (( i = 0; i < limit; i++ )); do
    if test "$@"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# What the tool tests' client does (an nbdsh script): 10 reads of
# 4 KiB, 5 writes of 64 KiB, then 1 read past the end, which the server
# must refuse with EINVAL at the edge.
tool_test_io='
for i in range(10):
    h.pread(4096, i * 4096)
for i in range(5):
    h.pwrite(b"w" * 65536, 1048576 + i * 65536)
h.set_strict_mode(0)
try:
    h.pread(512, 64 * 1024 * 1024)
    raise Exception("read past the end succeeded")
except nbd.Error as e:
    assert e.errno == "EINVAL", e.errno
'

# start_tool OUT REGEX CMD...: run a tracing tool against the server in
# the background, for at most 120 s, its output in OUT and its errors
# in OUT.err; wait until OUT has a line matching REGEX (the tool says it
# is attached) or fail showing both.  The tool's pid is left in $tool.
start_tool ()
{
  local out="$1" regex="$2"
  shift 2
  timeout -k 120 120 "$@" > "$out" 2> "$out.err" &
  tool=$!
  cleanup_fn _kill_pid "$tool"
  wait_for_output "$out" "$regex" "$tool" ||
    { cat "$out" "$out.err"; fail "$* did not start"; }
}

# wait_for_bpftrace PID OUT ERR: PID is bpftrace, or the timeout that
# runs it, writing to OUT and ERR.  "Attaching N probes..." is printed
# before the probes are in, which under load has taken longer than any
# fixed wait (the requests a test then made went unseen); bpftrace first
# waits in epoll_wait once they are in and BEGIN has run.  Fails the
# test, showing ERR, if bpftrace exits or 60 s pass first.
wait_for_bpftrace ()
{
  local pid="$1" out="$2" err="$3" bt= i
  for (( i = 0; i < 600; i++ )); do
    kill -0 "$pid" 2>/dev/null ||
      { cat "$err"; fail "bpftrace exited before attaching"; }
    if [ -z "$bt" ]; then
      if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = bpftrace ]; then
        bt="$pid"
      else
        bt="$(pgrep -P "$pid" -x bpftrace || :)"
      fi
    fi
    if [ -n "$bt" ] && grep -qs Attaching "$out" "$err" &&
       [ "$(cat "/proc/$bt/wchan" 2>/dev/null)" = do_epoll_wait ]; then
      return 0
    fi
    sleep 0.1
  done
  cat "$err"
  fail "bpftrace did not attach within 60 s"
}

# start_bpftrace SECS OUT ERR ARGS...: run "bpftrace ARGS" in the
# background for at most SECS seconds, its output in OUT and its errors
# in ERR, killed at exit; wait (as wait_for_bpftrace) until its probes
# are in.  Its pid (that of the timeout running it) is left in $bt, for
# interrupt_tracer or wait.
start_bpftrace ()
{
  local secs="$1" out="$2" err="$3"
  shift 3
  timeout -k 120 "$secs" bpftrace "$@" > "$out" 2> "$err" &
  bt=$!
  cleanup_fn _kill_pid "$bt"
  wait_for_bpftrace "$bt" "$out" "$err"
}

# user_probe_program: a bpftrace program, on stdout, that prints (for
# trace_in_order) "start ID COOKIE TYPE OFFSET" for each request_start
# and "user ID COOKIE NAME A B [TEXT]" each time a plugin fires the
# server's user probe (nbdkit_probe, the hosts' probe helpers).
user_probe_program ()
{
  local b="$server_binary"
  cat <<BT
usdt:$b:nbdkit:request_start {
  printf("%llu start %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$b:nbdkit:user {
  printf("%llu user %d %d %s %d %d [%s]\n", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}
BT
}

# Stop a tracer (bpftrace, or a tool that execs it) with ^C so that it
# prints its maps, and wait for it.  Under load a single SIGINT has been
# seen to go unheeded until the tracer's own timeout, so the signal is
# repeated every 2 s, for at most 20 s, to bpftrace itself.
interrupt_tracer ()
{
  local pid="$1" i p
  for (( i = 0; i < 200; i++ )); do
    if (( i % 20 == 0 )); then
      kill -INT "$pid" 2>/dev/null || break
      # timeout passes on only the first ^C and ignores the rest, and
      # bpftrace heeds one only if it lands while bpftrace waits in
      # epoll_wait (a CI run showed one lost that way): repeat it to
      # the bpftrace in timeout's process group itself.
      (( i == 0 )) ||
        for p in $(pgrep -g "$pid" -x bpftrace || :); do
          kill -INT "$p" 2>/dev/null || :
        done
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Still there: show where it and its children are stuck, for the log,
  # then let the tracer's timeout decide.
  if kill -0 "$pid" 2>/dev/null; then
    echo "$0: tracer $pid still running 20 s after ^C:" >&2
    for p in "$pid" $(pgrep -P "$pid" || :); do
      echo "  $p $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-60)" \
        "state=$(awk '/^State/ {print $2}' "/proc/$p/status" 2>/dev/null)" \
        "wchan=$(cat "/proc/$p/wchan" 2>/dev/null)" >&2
      sed 's/^/    /' "/proc/$p/stack" >&2 2>/dev/null || :
    done
  fi
  wait "$pid" || :
}

# --- Tracing a running server's probes -----------------------------------

# filter_so NAME: the path of our built nbdkit-NAME-filter.so, for a
# bpftrace program's usdt:PATH:nbdkit:PROBE (fails if it was not built).
filter_so ()
{
  local so="$abs_top_builddir/filters/$1/.libs/nbdkit-$1-filter.so"
  [ -f "$so" ] || fail "$so was not built"
  echo "$so"
}

# trace_start OUT PROGRAM: attach bpftrace running PROGRAM (a bpftrace
# script as a string) to the server that start_server started (only its
# events are seen, not other tests' servers), and wait until the probes
# are in.  Its output goes to OUT, its errors to OUT.err; its pid is in
# $tracer.  Drive the client, then call trace_stop to end it (its maps
# are printed at exit).  Tests that trace need requires_root,
# requires_cmd bpftrace and tracing_lock.
tracer=
trace_start ()
{
  local out="$1" program="$2"
  [ -n "$server_pid" ] || fail "trace_start: no server (call start_server)"
  printf '%s\n' "$program" > "$out.bt"
  local bt
  start_bpftrace 120 "$out" "$out.err" -p "$server_pid" "$out.bt"
  tracer=$bt
}

trace_stop ()
{
  [ -n "$tracer" ] && interrupt_tracer "$tracer"
  tracer=
}

# trace_stop_at_close: for a trace_start into $tmpdir/out whose program
# prints "NSECS close ..." at connection_close (which fires once the
# server has seen the client go): wait (bounded) for that line, stop the
# tracer and leave its lines in time order in $tmpdir/got (and the log).
trace_stop_at_close ()
{
  wait_for_output "$tmpdir/out" '^[0-9]+ close ' "$tracer" ||
    fail "no connection_close"
  trace_stop
  trace_in_order "$tmpdir/out" > "$tmpdir/got"
  cat "$tmpdir/got"
}

# request_start_clause: the bpftrace clause that prints "NSECS start ID
# COOKIE" at each of the server's request_start, for trace_join.
request_start_clause ()
{
  echo "usdt:$server_binary:nbdkit:request_start {
  printf(\"%llu start %d %d\\n\", nsecs, arg0, arg1); }"
}

# trace_join FILE: FILE (from trace_in_order) has "start ID COOKIE"
# lines and "NAME ID COOKIE REST" lines of module probes that carry the
# connection id and cookie first.  Each NAME line is printed as "NAME
# WHO REST", where WHO says whose it is: rN for the Nth request_start
# with that id and cookie, conn for cookie 0 and the id of a connection
# that made a request (outside any request), none for id and cookie 0,
# stray for anything else.  A test diffs or greps the result, so a
# probe charged to no request, or to the wrong one, shows.
trace_join ()
{
  awk 'NR == FNR { if ($1 == "start") { r[$2 " " $3] = "r" ++n; c[$2] }
                   next }
       $1 == "start" { next }
       { k = $2 " " $3
         who = k in r ? r[k] : $3 != 0 ? "stray" :
               $2 in c ? "conn" : $2 == 0 ? "none" : "stray"
         s = $1 " " who
         for (i = 4; i <= NF; i++) s = s " " $i
         print s }' "$1" "$1"
}

_kill_pid ()
{
  local pid="$1" i
  kill "$pid" 2>/dev/null || return 0
  for (( i = 0; i < 50; i++ )); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || :
}

server_pid=
start_server ()
{
  sock="$tmpdir/sock"
  pidfile="$tmpdir/server.pid"
  rm -f "$sock" "$pidfile"
  "$NBDKIT" -f -U "$sock" -P "$pidfile" "$@" 9>&- &
  server_pid=$!
  cleanup_fn _kill_pid "$server_pid"
  # The pid file is written once the socket listens.
  if ! wait_for 20 -s "$pidfile"; then
    fail "server did not write $pidfile within 20s: $NBDKIT $*"
  fi
  if ! wait_for 5 -S "$sock"; then
    fail "server did not create socket $sock: $NBDKIT $*"
  fi
  uri="nbd+unix:///?socket=$sock"
}

# A TCP port on 127.0.0.1 that is free right now.
free_port ()
{
  /usr/bin/python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# As start_server, but listening on 127.0.0.1:$port (set here).
start_tcp_server ()
{
  port="$(free_port)"
  pidfile="$tmpdir/server.pid"
  rm -f "$pidfile"
  "$NBDKIT" -f -i 127.0.0.1 -p "$port" -P "$pidfile" "$@" 9>&- &
  server_pid=$!
  cleanup_fn _kill_pid "$server_pid"
  if ! wait_for 20 -s "$pidfile"; then
    fail "server did not write $pidfile within 20s: $NBDKIT $*"
  fi
  uri="nbd://127.0.0.1:$port"
}

stop_server ()
{
  if [ -n "$server_pid" ]; then
    _kill_pid "$server_pid"
    wait "$server_pid" 2>/dev/null || :
    server_pid=
  fi
}
