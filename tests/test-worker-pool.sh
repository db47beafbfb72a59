#!/usr/bin/env bash
# A connection starts with one worker and grows its pool only when
# requests are slow.  Against a plugin whose reads take 20 ms, a client
# with 16 reads in flight gets them served side by side (the plugin saw
# more than one read at once); against the memory plugin, whose reads
# take microseconds, the pool never grows (no "workers" debug message).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

slow="$abs_top_builddir/tests/.libs/slow-plugin.so"
[ -f "$slow" ] || fail "$slow was not built"
# The pool grows on measured time: other tests running beside this one
# (make -j) stretch fast requests, so run alone.
tracing_lock

aio_reads='
for round in range(4):
    bufs = [nbd.Buffer(4096) for i in range(16)]
    cookies = [h.aio_pread(bufs[i], 4096 * i) for i in range(16)]
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for c in cookies:
        assert h.aio_command_completed(c)
'
t "$NBDKIT" -v -U - "$slow" --run "nbdsh -u \"\$uri\" -c '$aio_reads'" \
  2> "$tmpdir/slow.err" || { cat "$tmpdir/slow.err"; fail "slow run failed"; }
grep 'most reads in flight\|workers' "$tmpdir/slow.err" || :
most=$(sed -n 's/.*most reads in flight at once: \([0-9]*\).*/\1/p' \
         "$tmpdir/slow.err" | tail -1)
[ -n "$most" ] || fail "the slow plugin did not report"
[ "$most" -gt 1 ] ||
  fail "slow requests were never run side by side (most in flight: $most)"

t "$NBDKIT" -v -U - memory 64M --run "nbdsh -u \"\$uri\" -c '$aio_reads'" \
  2> "$tmpdir/fast.err" || { cat "$tmpdir/fast.err"; fail "memory run failed"; }
if grep 'workers' "$tmpdir/fast.err"; then
  fail "the pool grew for requests that take microseconds"
fi
