#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Completion from the server's event loop (nbdkit_async_watch,
# nbdkit-async(3)): the example-async plugin with loop=server owns no
# thread; a timerfd per connection is watched by the server, whose
# nbdkit-events thread completes the requests.
#  - the bytes are right;
#  - every request_complete fires on the thread named nbdkit-events;
#  - 256 reads of 100 ms sent together on one connection all finish
#    within 1.5 s (one at a time: 25.6 s) while the server has at most
#    8 threads.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
requires_cmd python3
tracing_lock

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_complete { printf("complete %d %d %s\n", arg0, arg2, comm); }
BT
timeout -k 120 60 bpftrace "$tmpdir/trace.bt" > "$tmpdir/out" 2>"$tmpdir/err" &
bt=$!
cleanup_fn _kill_pid "$bt"
wait_for_bpftrace "$bt" "$tmpdir/out" "$tmpdir/err"

t "$NBDKIT" -U - example-async size=1M delay=5 loop=server --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"abc\" * 1000, 4096)
assert h.pread(3000, 4096) == b\"abc\" * 1000
h.zero(1000, 4096)
assert h.pread(1000, 4096) == bytes(1000)
h.flush()
"'
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/out"
[ "$(grep -c '^complete 1 0 nbdkit-events$' "$tmpdir/out")" -eq 5 ] ||
  fail "not 5 completions on the server's event thread"
! grep '^complete' "$tmpdir/out" | grep -v 'nbdkit-events$' ||
  fail "a request completed on another thread"

start_server -t 4 example-async size=1M delay=100 loop=server
out=$(t python3 "$srcdir/read-burst.py" "$sock" "$server_pid" 256) ||
  fail "the reads failed: $out"
echo "$out"
read -r _ el _ most _ <<< "$out"
awk -v e="$el" 'BEGIN { exit !(e >= 0.1 && e < 1.5) }' ||
  fail "256 reads of 100 ms took $el s: they did not overlap"
[ "$most" -le 8 ] || fail "the server had $most threads"
grep -q nbdkit-events /proc/"$server_pid"/task/*/comm ||
  fail "no nbdkit-events thread"
