#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The worked examples of docs/nbdkit-tracing.pod and docs/nbdkit-probes.pod
# run as printed and show what the pages say they show.
#
# Marking convention, in the POD source: a paragraph consisting of
#
#   =for test NAME
#
# marks the next verbatim paragraph (the run of non-blank lines indented
# by whitespace that follows) as the example NAME.  POD formatters ignore
# "=for test", so readers see only the example.  This test extracts each
# marked example (one leading space removed from each line) and runs it
# with bash, from a directory where ./nbdkit is the build tree's wrapper
# and ./server/nbdkit the server binary, as the pages assume.  The word
# PID in an example is replaced by the process id of a server started
# for it.  Each NAME has a check_NAME function below that runs the
# example against a live server and a real client and checks its output;
# a marked example without one, or a check whose example has gone, fails.
# Throughout, a neighbour (a second server from the same binary) serves
# reads, writes and flushes of its own: the examples are scoped to one
# process, so none of its requests may show in what they count or record.
source "$(dirname "$0")/functions.sh"
requires_cmd perf bpftrace nbdsh nbdinfo timeout
requires_root
requires_probes
requires perf --version
tracing_lock

export PERF_PAGER=cat
# perf's build-id cache lives in $HOME/.debug: a private one keeps other
# builds of the server (whose probes may differ) out of perf list and
# perf probe, and leaves the user's cache alone.
export HOME="$tmpdir/home"
mkdir "$HOME"
pods=("$abs_top_srcdir/docs/nbdkit-tracing.pod"
      "$abs_top_builddir/docs/nbdkit-probes.pod")

# ---- extraction ---------------------------------------------------------

mkdir "$tmpdir/ex"
for pod in "${pods[@]}"; do
  awk -v dir="$tmpdir/ex" '
    /^=for test [a-z0-9-]+[[:space:]]*$/ { name = $3; state = 1; next }
    state == 1 && /^[ \t]/ { state = 2; file = dir "/" name ".sh" }
    state == 1 && /^[^ \t]/ && !/^$/ {
      print "=for test " name ": no verbatim paragraph follows" > "/dev/stderr"
      exit 1
    }
    state == 2 && /^$/ { close(file); state = 0; next }
    state == 2 { sub(/^ /, ""); print > file }
  ' "$pod" || fail "$pod: bad =for test marking"
done
ls "$tmpdir/ex" | sed 's/\.sh$//' | sort > "$tmpdir/names"
[ -s "$tmpdir/names" ] || fail "no marked examples found"

# The directory the examples run in.
run="$tmpdir/run"
mkdir "$run"
ln -s "$abs_top_builddir/nbdkit" "$run/nbdkit"
ln -s "$abs_top_builddir/server" "$run/server"

# Run example $1 in $run; its output goes to $tmpdir/$1.out.
run_example ()
{
  local f="$tmpdir/ex/$1.sh"
  [ -f "$f" ] || fail "example $1 is not marked in the pages"
  echo "--- example $1:"
  cat "$f"
  local r=0
  ( cd "$run" && t bash "$f" ) > "$tmpdir/$1.out" 2>&1 || r=$?
  if [ "$r" -ne 0 ]; then
    cat "$tmpdir/$1.out"
    fail "example $1 exited with status $r"
  fi
  cat "$tmpdir/$1.out"
}

# Start example $1 (a single bpftrace command) in the background and
# wait until its probes are attached.  Sets $tracer.
tracer=
start_tracer ()
{
  local f="$tmpdir/ex/$1.sh"
  [ -f "$f" ] || fail "example $1 is not marked in the pages"
  echo "--- example $1:"
  cat "$f"
  { printf 'exec '; cat "$f"; } > "$tmpdir/$1.exec"
  # timeout passes our ^C on, then kills only after 120 s: in loaded
  # CI runs bpftrace has taken more than 30 s to exit, and its maps,
  # printed to a file, are lost if it is killed first.
  ( cd "$run" && exec timeout -k 120 120 bash "$tmpdir/$1.exec" ) \
    > "$tmpdir/$1.out" 2> "$tmpdir/$1.err" &
  tracer=$!
  cleanup_fn _kill_pid "$tracer"
  wait_for_bpftrace "$tracer" "$tmpdir/$1.out" "$tmpdir/$1.err"
}

# Stop the tracer with ^C, as a user would, and show what it printed.
stop_tracer ()
{
  sleep 1
  interrupt_tracer "$tracer"
  tracer=
  cat "$tmpdir/$1.out"
  grep -v RLIMIT_MEMLOCK "$tmpdir/$1.err" >&2 || :
}

# The neighbour: the same binary, a read, a write and a flush every few
# ms and a short second connection every 0.2 s, until the test ends (at
# most 280 s).
"$NBDKIT" -U - memory 1G --run 'nbdsh -u "$uri" -c "
import time
end = time.monotonic() + 280
i = 0
while time.monotonic() < end:
    h.pread(4096, 1048576); h.pwrite(b\"n\" * 512, 0); h.flush()
    i += 1
    if i % 40 == 0:
        g = nbd.NBD(); g.connect_uri(\"$uri\"); g.pread(512, 0); g.shutdown()
    time.sleep(0.005)
"' > "$tmpdir/neighbour.log" 2>&1 9>&- &
neighbour=$!
cleanup_fn _kill_pid "$neighbour"

# Start a server (ARGS) for example $1 to trace: PID in the example
# becomes its process id; the client reaches it at $uri.
serve_for ()
{
  local name=$1
  shift
  start_server "$@"
  sed -i "s/\bPID\b/$(cat "$pidfile")/g" "$tmpdir/ex/$name.sh"
}

# The client for the bpftrace examples: 3 reads, 2 writes, 1 flush.
client ()
{
  t nbdsh -u "$uri" -c "
for i in range(3): h.pread(4096, 65536 * i)
for i in range(2): h.pwrite(b\"w\" * 512, 1048576 * i)
h.flush()
"
}

# What perf recorded for example $1 came from one process (its server),
# not from the neighbour too.
perf_one_process ()
{
  local n
  n="$(cd "$run" && perf script -F pid 2>/dev/null | sort -u | wc -l)"
  [ "$n" -eq 1 ] || fail "example $1 recorded probes of $n processes, not 1"
}

# Sum the counts of histogram MAP from bpftrace output file $2.
hist_total ()
{
  awk -v map="$1" '
    index($0, map ":") == 1 { on = 1; next }
    /^@/ { on = 0 }
    on && /^[[(]/ { sub(/^[^)\]]*[)\]] */, ""); n += $1 }
    END { print n + 0 }' "$2"
}

# The probes declared in server/probes.d.
sed -n 's/^[[:space:]]*probe[[:space:]]\{1,\}\([a-z_0-9]*\).*/\1/p' \
  "$abs_top_srcdir/server/probes.d" | sort -u > "$tmpdir/declared"
[ -s "$tmpdir/declared" ] || fail "no probes in probes.d"

# ---- perf ------------------------------------------------------------------

# perf events are global: start and end with none of ours.
perf probe -q -d 'sdt_nbdkit:*' 2>/dev/null || :
cleanup_fn perf probe -q -d 'sdt_nbdkit:*'

check_perf_list ()
{
  run_example perf-list
  local p
  while read -r p; do
    grep -Eq "sdt_nbdkit:$p[ @]" "$tmpdir/perf-list.out" ||
      fail "perf list does not show sdt_nbdkit:$p"
  done < "$tmpdir/declared"
}

check_perf_probe ()
{
  run_example perf-probe
  local p
  for p in connection_accept handshake_done request_start request_done \
           reply_send connection_close; do
    grep -Eq "sdt_nbdkit:$p[ @]" "$tmpdir/perf-probe.out" ||
      fail "perf probe -l does not list sdt_nbdkit:$p"
  done
}

check_perf_record ()
{
  run_example perf-record
  ( cd "$run" && perf script ) > "$tmpdir/script" 2>&1 || :
  # nbdinfo reads 8192 bytes at offset 0: command 0, offset 0, count 8192.
  grep 'sdt_nbdkit:request_start:' "$tmpdir/perf-record.out" |
    grep -Eq ' arg3=0 arg4=0 arg5=8192 arg6=[0-9]+( |$)' ||
    fail "perf script shows no request_start for nbdinfo's read"
  grep -q 'sdt_nbdkit:connection_accept:' "$tmpdir/perf-record.out" ||
    fail "perf script shows no connection_accept"
  grep -q 'sdt_nbdkit:connection_close:' "$tmpdir/perf-record.out" ||
    fail "perf script shows no connection_close"
  perf_one_process perf-record
}

check_perf_record_nbdsh ()
{
  run_example perf-record-nbdsh
  local line cookie
  line="$(grep 'sdt_nbdkit:request_start:' "$tmpdir/perf-record-nbdsh.out" |
          grep -E ' arg3=0 arg4=1048576 arg5=4096 arg6=[0-9]+( |$)' | head -1)"
  [ -n "$line" ] ||
    fail "no request_start for the read of 4096 bytes at 1048576"
  cookie="$(echo "$line" | grep -Eo ' arg1=[0-9]+ arg2=[0-9]+ ')"
  # request_done: id, cookie, command 0, errno 0, 4096 bytes.
  grep 'sdt_nbdkit:request_done:' "$tmpdir/perf-record-nbdsh.out" |
    grep -q "${cookie}arg3=0 arg4=0 arg5=4096 " ||
    fail "no request_done for the read (${cookie}) with 4096 bytes"
  perf_one_process perf-record-nbdsh
}

check_perf_remove ()
{
  run_example perf-remove
  if perf probe -l 2>/dev/null | grep -q 'sdt_nbdkit:'; then
    fail "perf probe -l still lists sdt_nbdkit events"
  fi
}

# ---- bpftrace ----------------------------------------------------------------

check_bpftrace_list ()
{
  run_example bpftrace-list
  sed -n 's/^usdt:.*:nbdkit:\([a-z_0-9]*\)$/\1/p' \
    "$tmpdir/bpftrace-list.out" | sort -u > "$tmpdir/listed"
  diff -u "$tmpdir/declared" "$tmpdir/listed" ||
    fail "bpftrace -l and probes.d list different probes"
}

check_bpftrace_list_pid ()
{
  serve_for bpftrace-list-pid memory 1M
  local pid
  pid="$(cat "$pidfile")"
  run_example bpftrace-list-pid
  stop_server
  # With -p, the plugin's own probes (the memory plugin's page store)
  # are listed too, under its .so: keep the server binary's.
  sed -n 's/^usdt:[^:]*\/nbdkit:nbdkit:\([a-z_0-9]*\)$/\1/p' \
    "$tmpdir/bpftrace-list-pid.out" | sort -u > "$tmpdir/listed"
  grep -q 'nbdkit-memory-plugin\.so:nbdkit:allocator_zstd_compress$' \
    "$tmpdir/bpftrace-list-pid.out" ||
    fail "bpftrace -p $pid -l does not list the memory plugin's probes"
  diff -u "$tmpdir/declared" "$tmpdir/listed" ||
    fail "bpftrace -p $pid -l does not list the probes of probes.d"
}

check_bpftrace_count ()
{
  serve_for bpftrace-count memory 1G
  start_tracer bpftrace-count
  client
  stop_tracer bpftrace-count
  stop_server
  local o="$tmpdir/bpftrace-count.out"
  # Commands by code: 0 read, 1 write, 3 flush.
  grep -q '^@requests\[0\]: 3$' "$o" || fail "expected 3 reads counted"
  grep -q '^@requests\[1\]: 2$' "$o" || fail "expected 2 writes counted"
  grep -q '^@requests\[3\]: 1$' "$o" || fail "expected 1 flush counted"
  # request_start's count (arg4), 6th argument: bpftrace 0.17 reads it.
  grep -q '^@bytes\[0\]: 12288$' "$o" || fail "expected 3 x 4096 bytes read"
  grep -q '^@bytes\[1\]: 1024$' "$o" || fail "expected 2 x 512 bytes written"
}

check_bpftrace_latency ()
{
  serve_for bpftrace-latency memory 1G
  start_tracer bpftrace-latency
  client
  stop_tracer bpftrace-latency
  stop_server
  local o="$tmpdir/bpftrace-latency.out" n
  n="$(hist_total '@usecs[0]' "$o")"
  [ "$n" -eq 3 ] || fail "latency histogram of reads holds $n, not 3"
  n="$(hist_total '@usecs[1]' "$o")"
  [ "$n" -eq 2 ] || fail "latency histogram of writes holds $n, not 2"
  n="$(hist_total '@usecs[3]' "$o")"
  [ "$n" -eq 1 ] || fail "latency histogram of flushes holds $n, not 1"
  ! grep -q '^@start\|^@command' "$o" ||
    fail "the END clause left @start or @command behind"
}

check_bpftrace_layers ()
{
  serve_for bpftrace-layers memory 1G
  start_tracer bpftrace-layers
  client
  stop_tracer bpftrace-layers
  stop_server
  local o="$tmpdir/bpftrace-layers.out"
  grep -q '^@calls\[memory, pread\]: 3$' "$o" ||
    fail "expected 3 pread calls into the memory plugin"
  grep -q '^@calls\[memory, pwrite\]: 2$' "$o" ||
    fail "expected 2 pwrite calls into the memory plugin"
  grep -Eq '^@ns\[memory, pread\]: [1-9][0-9]*$' "$o" ||
    fail "no time summed for the memory plugin's pread"
}

check_bpftrace_slow ()
{
  serve_for bpftrace-slow memory 1G
  start_tracer bpftrace-slow
  # A 32 MiB write takes well over the example's 1000 us threshold.
  t nbdsh -u "$uri" -c 'h.pwrite(b"s" * 33554432, 0); h.pread(512, 0)'
  stop_tracer bpftrace-slow
  stop_server
  grep -Eq '^conn [0-9]+ cookie [0-9]+ command 1 errno 0 bytes 33554432: [0-9]+ us$' \
    "$tmpdir/bpftrace-slow.out" ||
    fail "the 32 MiB write was not reported as slow"
}

check_bpftrace_busy_poll ()
{
  serve_for bpftrace-busy-poll --busy-poll=10000 memory 1M
  start_tracer bpftrace-busy-poll
  # A 10 ms window: back-to-back reads are caught, and the wait before
  # each read that comes 100 ms later runs the window out.
  t nbdsh -u "$uri" -c "
import time
for i in range(200): h.pread(512, 0)
for i in range(2):
    time.sleep(0.1)
    h.pread(512, 0)
"
  stop_tracer bpftrace-busy-poll
  stop_server
  local o="$tmpdir/bpftrace-busy-poll.out" n
  n="$(sed -n 's/^@windows\[caught\]: //p' "$o")"
  [ "${n:-0}" -ge 100 ] || fail "only ${n:-0} of 200 back-to-back reads caught"
  n="$(sed -n 's/^@windows\[ran out\]: //p' "$o")"
  [ "${n:-0}" -ge 2 ] || fail "${n:-0} windows ran out, expected 2 or more"
  # A window runs out only after its 10 ms: all in [8K, 16K) or above.
  n="$(hist_total '@usecs[ran out]' "$o")"
  [ "$n" -ge 2 ] || fail "the ran-out histogram holds $n, not 2 or more"
  awk '/^@usecs\[ran out\]:/ { on = 1; next } /^@/ { on = 0 }
       on && /^\[/ && !/^\[(8K|16K|32K|64K|128K),/ { bad = 1 }
       END { exit bad }' "$o" || fail "a window ran out in under 8 ms"
}

check_probes_connections ()
{
  serve_for probes-connections memory 1M
  start_tracer probes-connections
  t nbdsh -u "$uri" -c "h.pread(512, 0)"
  stop_tracer probes-connections
  stop_server
  local o="$tmpdir/probes-connections.out" id
  [ "$(grep -c ' from unix over unix$' "$o")" -eq 1 ] ||
    fail "expected the one connection_accept of the traced server"
  id="$(sed -n 's/^\([0-9]*\): from unix over unix$/\1/p' "$o" | head -1)"
  [ -n "$id" ] || fail "no connection_accept line"
  grep -q "^$id: export \"\", 1048576 bytes\$" "$o" ||
    fail "no export_select line for connection $id"
  grep -Eq "^$id: closed \([a-z ]+\) after [1-9][0-9]* requests\$" "$o" ||
    fail "no connection_close line for connection $id"
}

# ---- run them all, in an order where perf's steps build on each other ----

order="perf-list perf-probe perf-record perf-record-nbdsh perf-remove
       bpftrace-list bpftrace-list-pid bpftrace-count bpftrace-latency
       bpftrace-layers bpftrace-slow bpftrace-busy-poll probes-connections"
printf '%s\n' $order | sort > "$tmpdir/known"
diff -u "$tmpdir/known" "$tmpdir/names" ||
  fail "marked examples and the checks of this test differ"
for name in $order; do
  "check_${name//-/_}"
done
kill -0 "$neighbour" 2>/dev/null || {
  cat "$tmpdir/neighbour.log"
  fail "the neighbour server stopped during the test"
}
echo "all $(echo $order | wc -w) examples ok"
