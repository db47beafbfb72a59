#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The busy_poll and busy_poll_look probes under bpftrace, and what they
# show about polling.
# With a 10 ms window, 300 reads in a row (each sent as soon as the last
# reply is in) are caught by polling: busy_poll fires with caught = 1,
# except on the few waits that sleep to look at the client.  Then
# three reads 100 ms apart: each wait before them runs the whole window
# out (caught = 0, at least 10 ms spent).  A server with --busy-poll=0
# never polls, so the probe never fires for it.  And polling stops for
# a client that keeps sending while the server sleeps (below).
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

start_server --busy-poll=10000 memory 1M
on_pid="$(cat "$pidfile")" on_uri="$uri"
sock0="$tmpdir/sock0"
"$NBDKIT" -f -U "$sock0" -P "$tmpdir/off.pid" --busy-poll=0 memory 1M &
cleanup_fn _kill_pid "$!"
wait_for 20 -s "$tmpdir/off.pid" || fail "the --busy-poll=0 server did not start"
off_pid="$(cat "$tmpdir/off.pid")"

start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" -e "
usdt:$server_binary:nbdkit:busy_poll
  { printf(\"poll %d %d %d %d %lld\\n\", pid, arg0, arg1, arg2, nsecs); }
usdt:$server_binary:nbdkit:busy_poll_look
  { printf(\"look %d %d %d %d %lld\\n\", pid, arg0, arg1, arg2, nsecs); }"

client='
import time
for i in range(300):
    h.pread(512, 0)
for i in range(3):
    time.sleep(0.1)
    h.pread(512, 0)
'
t nbdsh -u "$on_uri" -c "$client"
t nbdsh -u "nbd+unix:///?socket=$sock0" -c "$client"

# Connections 2 and 3: rounds of N reads sent in one write, the replies
# read before the next round, so each round is one wait.  Connection 2
# sends 8 a round, 40 rounds.  Its 32nd wait sleeps to look, finds the
# other seven requests already in, and the connection rests from then
# on: rounds 33-40 do not poll.  Connection 3 goes through four phases
# (the time each began goes to "marks"):
#  1. 600 rounds of 1.  Nothing else is ever in, so polling goes on, and
#     each look that finds the client waiting doubles the gap to the
#     next (32, 64, 128, then 256 waits): 4 looks, not 18.
#  2. 200 rounds of 8.  Polled until the next look (wait 736), then it
#     rests: about 135 polls.
#  3. 90 rounds of 1.  The rest runs out after 64 and polling resumes,
#     with the gap back at 32 as the pipelining look left it.
#  4. 100 rounds of 8.  So the look comes within a few waits, and it
#     rests again: about 5 polls, where a gap left at 256 would poll
#     all 100.
t /usr/bin/python3 - "$sock" "$abs_top_srcdir/tests/hostile-client.py" \
    "$tmpdir/marks" <<'PY'
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("hostile", sys.argv[2])
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)
def rounds(c, n, count):
    reqs = {i: hc.Req(hc.CMD_READ, 0, 512) for i in range(n)}
    for r in range(count):
        c.send(b"".join(c.header(hc.CMD_READ, 0, 512, cookie=i)
                        for i in range(n)))
        for i in range(n):
            rep = c.reply(reqs)
            assert rep.error == 0 and len(rep.data) == 512, rep.error
c = hc.Conn(sys.argv[1]).open()
rounds(c, 8, 40)
c.disc()
with open(sys.argv[3], "w") as marks:
    c = hc.Conn(sys.argv[1]).open()
    for phase, (n, count) in enumerate([(1, 600), (8, 200), (1, 90),
                                        (8, 100)], 1):
        print(phase, time.monotonic_ns(), file=marks)
        rounds(c, n, count)
    c.disc()
PY
sleep 1
interrupt_tracer "$bt"

awk '$1 == "poll"' "$tmpdir/out" > "$tmpdir/polls"
awk '{ n["pid " $2 " id " $3 " caught=" $4]++ }
     END { for (k in n) print k ": " n[k] }' "$tmpdir/polls"
[ "$(awk -v p="$off_pid" '$2 == p' "$tmpdir/polls" | wc -l)" -eq 0 ] ||
  fail "busy_poll fired for the --busy-poll=0 server"
caught="$(awk -v p="$on_pid" '$2 == p && $3 == 1 && $4 == 1' "$tmpdir/polls" |
          wc -l)"
[ "$caught" -ge 200 ] ||
  fail "only $caught of 300 back-to-back reads were caught by polling"
awk -v p="$on_pid" '$2 == p && $4 == 0 && $5 < 10000000 { bad = 1 }
                    END { exit bad }' "$tmpdir/polls" ||
  fail "a window ran out before its 10 ms"
missed="$(awk -v p="$on_pid" '$2 == p && $3 == 1 && $4 == 0' "$tmpdir/polls" |
          wc -l)"
[ "$missed" -ge 3 ] || fail "$missed windows ran out, expected 3 or more"
batched="$(awk -v p="$on_pid" '$2 == p && $3 == 2' "$tmpdir/polls" | wc -l)"
echo "8 requests a round: $batched polls"
[ "$batched" -le 33 ] ||
  fail "a client sending 8 at a time was still polled for: $batched polls"
# Connection 3's polls by phase: the last phase begun before each fired.
# (A window can run out before the first phase begins, if the client is
# slow to send its first request; none can catch input before it.)
awk -v p="$on_pid" 'NR == FNR { start[$1] = $2; next }
  $2 == p && $3 == 3 {
    ph = 0
    for (i = 1; i <= 4; i++) if ($6 >= start[i]) ph = i
    if (ph > 0 || $4 == 1) n[ph]++
  }
  END { for (i = 0; i <= 4; i++) print i, n[i] + 0 }' \
  "$tmpdir/marks" "$tmpdir/polls" > "$tmpdir/phases"
cat "$tmpdir/phases"
phase () { awk -v i="$1" '$1 == i { print $2 }' "$tmpdir/phases"; }
[ "$(phase 0)" -eq 0 ] ||
  fail "connection 3 caught input before its first phase"
[ "$(phase 1)" -ge 590 ] ||
  fail "a client sending 1 at a time was polled for $(phase 1) of 600 waits"
[ "$(phase 2)" -ge 100 ] && [ "$(phase 2)" -le 150 ] ||
  fail "phase 2 (8 a round after 600 of 1): $(phase 2) polls, not 100-150"
[ "$(phase 3)" -ge 20 ] ||
  fail "polling did not resume for 1 a round after a rest: $(phase 3) polls"
[ "$(phase 4)" -le 40 ] ||
  fail "the pipelining look did not put the gap back: $(phase 4) polls"
# The looks themselves, in time order: "more gap" for each.  The
# 300 reads of connection 1 and phase 1 of connection 3 look at waits
# 32, 96, 224 (and 480), each finding the client waiting and doubling
# the gap; connection 2 and phases 2 and 4 find more and rest.
awk '$1 == "look"' "$tmpdir/out" | sort -n -k6 > "$tmpdir/looks"
looks () {
  awk -v p="$1" -v c="$2" \
    '$2 == p && $3 == c { printf "%s%d %d", s, $4, $5; s = "," }' \
    "$tmpdir/looks"
}
for c in 1 2 3; do echo "connection $c looked: $(looks "$on_pid" $c)"; done
[ "$(looks "$on_pid" 1)" = "0 64,0 128,0 256" ] ||
  fail "connection 1 looked: $(looks "$on_pid" 1)"
[ "$(looks "$on_pid" 2)" = "1 32" ] ||
  fail "connection 2 looked: $(looks "$on_pid" 2)"
[ "$(looks "$on_pid" 3)" = "0 64,0 128,0 256,0 256,1 32,1 32" ] ||
  fail "connection 3 looked: $(looks "$on_pid" 3)"
[ "$(awk -v p="$off_pid" '$2 == p' "$tmpdir/looks" | wc -l)" -eq 0 ] ||
  fail "busy_poll_look fired for the --busy-poll=0 server"
awk -v p="$on_pid" '$2 == p && ($3 < 1 || $3 > 3) { bad = 1 } END { exit bad }' \
  "$tmpdir/polls" || fail "busy_poll carried a connection id other than 1-3"
