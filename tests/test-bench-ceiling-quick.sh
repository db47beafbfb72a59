#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bench/client-ceiling.sh --quick still works, and its null responder
# speaks NBD as libnbd expects.
#  1. bench/null-responder.c, built here, against nbdsh, both as it
#     spins and with --sleep: the export's size, structured replies,
#     zeroes read back (also after a write, which it forgets), a flush,
#     and 64 reads in flight at once; over TCP on a port too.  With
#     --sleep, its reader sleeps in read while the client is idle.
#  2. The bench, one short round against this build (and nbdkit where
#     installed), over Unix and with --tcp: its title, a row with
#     numbers and ratios for the ceiling, the floor and ours, both
#     workloads, and nothing left behind.
source "$(dirname "$0")/functions.sh"
requires_cmd cc fio nbdsh

# 1. The responder alone, spinning (nr) and sleeping (ns).
cc -O2 -I "$abs_top_srcdir/common" -o "$tmpdir/null-responder" \
  "$abs_top_srcdir/bench/null-responder.c" ||
  fail "cannot build bench/null-responder.c"
"$tmpdir/null-responder" "$tmpdir/nr.sock" 1048576 &
cleanup_fn _kill_pid "$!"
"$tmpdir/null-responder" --sleep "$tmpdir/ns.sock" 1048576 &
sleeper=$!
cleanup_fn _kill_pid "$sleeper"
wait_for 20 -S "$tmpdir/nr.sock" || fail "null-responder did not listen"
wait_for 20 -S "$tmpdir/ns.sock" || fail "null-responder --sleep did not listen"
for sock in nr ns; do
t nbdsh -u "nbd+unix:///?socket=$tmpdir/$sock.sock" -c '
assert h.get_size() == 1048576
assert h.get_structured_replies_negotiated()
assert h.pread(4096, 4096) == bytes(4096)
h.pwrite(b"\xff" * 300000, 0)
assert h.pread(300000, 0) == bytes(300000)
h.flush()
bufs = [nbd.Buffer(4096) for i in range(64)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
assert all(b.to_bytearray() == bytes(4096) for b in bufs)
'
done
# Over TCP, on a free port of 127.0.0.1.
port="$(free_port)"
"$tmpdir/null-responder" --sleep "$port" 1048576 &
cleanup_fn _kill_pid "$!"
for (( i = 0; i < 200; i++ )); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
  fail "null-responder did not listen on port $port"
t nbdsh -u "nbd://127.0.0.1:$port" -c '
assert h.get_size() == 1048576
h.pwrite(b"\x01" * 8192, 4096)
assert h.pread(8192, 4096) == bytes(8192)
'
# The sleeper, with a client connected and idle: asleep in the kernel
# (state S), not spinning.  Its CPU time over a second of that must
# stay near nothing (a spinning reader would use most of the second).
export SLEEPER="$sleeper"
t nbdsh -u "nbd+unix:///?socket=$tmpdir/ns.sock" -c '
import os, time
def ticks():
    f = open("/proc/%s/stat" % os.environ["SLEEPER"]).read()
    f = f[f.rindex(")") + 2:].split()
    return f[0], int(f[11]) + int(f[12])
time.sleep(0.2)
state, t0 = ticks()
time.sleep(1)
state, t1 = ticks()
print("sleeper: state", state, "ticks", t1 - t0)
assert state == "S", state
assert t1 - t0 <= 10, t1 - t0
'

# 2. The bench, over Unix and (--tcp) over TCP.
bench="$abs_top_srcdir/bench/client-ceiling.sh"
[ -x "$bench" ] || fail "$bench is missing or not executable"
# It loads both cores for a few seconds: run it alone, so that the
# timing-sensitive tests stay calm and its numbers mean something.
tracing_lock
for tr in unix tcp; do
  opts=(--quick --build "$abs_top_builddir")
  title="## Client ceiling"
  if [ "$tr" = tcp ]; then
    opts+=(--tcp)
    title="## Client ceiling, TCP"
  fi
  status=0
  TMPDIR="$tmpdir" timeout -k 5 60 "$bench" "${opts[@]}" \
    > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/out"
  [ "$status" -eq 0 ] || { cat "$tmpdir/err"; fail "bench ($tr) exited with $status"; }
  grep -qx "$title" "$tmpdir/out" || fail "no title \"$title\""
  grep -qF '| server | workload | IOPS median | min–max | CPU µs/req | ÷ ceiling | IOPS ÷ nbdkit | CPU ÷ nbdkit |' \
    "$tmpdir/out" || fail "no table header ($tr)"
  for rw in randread randwrite; do
    grep -Eq "^\| ceiling \| 4K $rw QD32 \| [0-9]+ \| [0-9]+–[0-9]+ \| [0-9]+\.[0-9]{2} \| 1\.000 \|" \
      "$tmpdir/out" || fail "no ceiling row for $rw ($tr)"
    grep -Eq "^\| floor \| 4K $rw QD32 \| [1-9][0-9]* \| [0-9]+–[0-9]+ \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9]{3} \|" \
      "$tmpdir/out" || fail "no floor row for $rw ($tr)"
    grep -Eq "^\| ours \| 4K $rw QD32 \| [1-9][0-9]* \| [0-9]+–[0-9]+ \| [0-9]+\.[0-9]{2} \| [0-9]+\.[0-9]{3} \|" \
      "$tmpdir/out" || fail "no row of ours with a ratio for $rw ($tr)"
  done
  # Nothing left behind: the work directory, the servers.
  dir="$(sed -n 's/^# \[[0-9]* s\] work directory: //p' "$tmpdir/err")"
  [ -n "$dir" ] || fail "the bench did not say where it works"
  [ ! -e "$dir" ] || fail "the bench left $dir behind"
  pids="$(sed -n 's/^# \[[0-9]* s\] server [^ ]* pid \([0-9]*\)$/\1/p' "$tmpdir/err")"
  [ -n "$pids" ] || fail "the bench started no server"
  for p in $pids; do
    ! kill -0 "$p" 2>/dev/null || fail "the bench left server $p running"
  done
done
