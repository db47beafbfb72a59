#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A connection starts with one worker and grows its pool only while
# running requests side by side pays:
#  - reads that sleep 20 ms (waiting) are served side by side, and once
#    reads turn fast again on the same connection, workers are parked
#    and every read still returns its bytes;
#  - reads that spin on the CPU for 2 ms (busy) get no more workers than
#    half the CPUs (one, below 4 CPUs);
#  - the memory plugin, whose reads take microseconds, never grows;
#  - a client's first burst of waiting reads on a new connection is
#    already served side by side: each waiting read doubles the
#    workers, so of 8 reads in flight at least 4 overlap (growing by one
#    worker per 4 slow reads, as before, overlapped only 2);
#  - and the pool does not wait for a read to finish to grow: 16 reads
#    that each wait 600 ms, sent together, all run at once (nbdkit(1)
#    -t: 16 requests at once by default), where growing only after a
#    read had finished overlapped 8 of them.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

slow="$abs_top_builddir/tests/.libs/slow-plugin.so"
[ -f "$slow" ] || fail "$slow was not built"
# The pool decides on measured time: other tests running beside this one
# (make -j) stretch fast requests, so run alone.
tracing_lock

mib=$((1024 * 1024))
# ROUNDS rounds of DEPTH reads of 4 KiB in flight, from BASE.
aio_reads () {
  local base=$1 rounds=$2 depth=$3
  echo "
for round in range($rounds):
    bufs = [nbd.Buffer(4096) for i in range($depth)]
    cookies = [h.aio_pread(bufs[i], $base + 4096 * i) for i in range($depth)]
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for i, c in enumerate(cookies):
        assert h.aio_command_completed(c)
        assert bufs[i].to_bytearray() == bytearray(4096)
"
}
most_in_flight () {
  sed -n 's/.*most reads in flight at once: \([0-9]*\).*/\1/p' "$1" | tail -1
}

# Waiting reads, then 3000 fast ones on the same connection.
script="$(aio_reads 0 4 16)
$(aio_reads $((32 * mib)) 188 16)"
t "$NBDKIT" -v -U - "$slow" --run "nbdsh -u \"\$uri\" -c '$script'" \
  2> "$tmpdir/slow.err" || { cat "$tmpdir/slow.err"; fail "slow run failed"; }
grep 'most reads in flight\|workers' "$tmpdir/slow.err" || :
most=$(most_in_flight "$tmpdir/slow.err")
[ -n "$most" ] || fail "the slow plugin did not report"
[ "$most" -gt 1 ] ||
  fail "waiting requests were never run side by side (most in flight: $most)"
grep -Eq 'slow requests: ([2-9]|1[0-6]) workers' "$tmpdir/slow.err" ||
  fail "the pool did not grow for waiting requests"
# Fast reads park workers.  Under a sanitizer on a loaded machine a fast
# read is sometimes preempted past the slow mark, and may be the one
# that parks a worker (classed busy): either way the pool must shrink.
grep -Eq '(fast|busy) requests: [0-9]* workers' "$tmpdir/slow.err" ||
  fail "the pool did not park workers once requests were fast"

# Busy reads: 64 of them, 16 in flight.
cpus=$(getconf _NPROCESSORS_ONLN)
busy_max=$(( cpus >= 4 ? cpus / 2 : 1 ))
t "$NBDKIT" -v -U - "$slow" \
  --run "nbdsh -u \"\$uri\" -c '$(aio_reads $((48 * mib)) 4 16)'" \
  2> "$tmpdir/busy.err" || { cat "$tmpdir/busy.err"; fail "busy run failed"; }
grep 'most reads in flight\|workers' "$tmpdir/busy.err" || :
most=$(most_in_flight "$tmpdir/busy.err")
[ -n "$most" ] || fail "the slow plugin did not report (busy)"
[ "$most" -le "$busy_max" ] ||
  fail "busy requests ran $most at once on $cpus CPUs (at most $busy_max)"

t "$NBDKIT" -v -U - memory 64M \
  --run "nbdsh -u \"\$uri\" -c '$(aio_reads 0 4 16)'" \
  2> "$tmpdir/fast.err" || { cat "$tmpdir/fast.err"; fail "memory run failed"; }
if grep 'workers' "$tmpdir/fast.err"; then
  fail "the pool grew for requests that take microseconds"
fi

# The first burst: one round of 8 waiting reads on a new connection.
t "$NBDKIT" -v -U - "$slow" \
  --run "nbdsh -u \"\$uri\" -c '$(aio_reads 0 1 8)'" \
  2> "$tmpdir/burst.err" || { cat "$tmpdir/burst.err"; fail "burst run failed"; }
grep 'most reads in flight\|workers' "$tmpdir/burst.err" || :
most=$(most_in_flight "$tmpdir/burst.err")
[ -n "$most" ] || fail "the slow plugin did not report (burst)"
[ "$most" -ge 4 ] ||
  fail "a first burst of 8 waiting reads overlapped only $most at once"

# The first burst of reads much slower than the watcher's ticks: all 16
# in flight at once, before any of them has finished.
t "$NBDKIT" -v -U - "$slow" wait=600 \
  --run "nbdsh -u \"\$uri\" -c '$(aio_reads 0 1 16)'" \
  2> "$tmpdir/burst16.err" ||
  { cat "$tmpdir/burst16.err"; fail "burst of 16 failed"; }
grep 'most reads in flight\|workers' "$tmpdir/burst16.err" || :
most=$(most_in_flight "$tmpdir/burst16.err")
[ "$most" = 16 ] ||
  fail "a first burst of 16 reads of 600 ms overlapped only $most at once"
