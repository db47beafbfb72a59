#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit-trace -p PID layers --folded: a server with --filter=delay
# rdelay=10ms --filter=cache over memory; a client makes 20 reads.  On
# ^C the output is folded stacks, each line exactly "frame;frame VALUE"
# with an integer VALUE (microseconds), and only the read stacks of
# this chain: read;delay, read;delay;cache, read;delay;cache;memory
# (the handshake's open, get_size... are not requests).  The delay
# layer's self time is 20 x 10 ms (no less, and not much more); the
# cache's and memory's are small, memory's not 0.  Then the same with
# the cache over the delay: the cache's self time must not take in the
# delay's below it.
source "$(dirname "$0")/functions.sh"
trace="$abs_top_srcdir/tools/nbdkit-trace"

requires_tracer nbdsh

# layers OUTER INNER: trace 20 reads through --filter=OUTER
# --filter=INNER over memory; the stacks in $out.
layers ()
{
  start_server --filter="$1" --filter="$2" memory 64M rdelay=10ms
  out="$tmpdir/folded-$1-$2"
  # The folded stacks are stdout; "Tracing..." goes to stderr.
  timeout -k 60 60 "$trace" -p "$server_pid" layers --folded \
    > "$out" 2> "$out.err" &
  tool=$!
  cleanup_fn _kill_pid "$tool"
  wait_for_output "$out.err" '^Tracing' "$tool" ||
    { cat "$out.err"; fail "nbdkit-trace layers did not start"; }

  t nbdsh -u "$uri" -c '
for i in range(20):
    h.pread(4096, i * 65536)
'
  interrupt_tracer "$tool"
  wait "$tool" || { cat "$out.err"; fail "nbdkit-trace layers failed"; }
  cat "$out"
  kill "$server_pid"
}

# is_folded FILE OUTER INNER: the checks above.
is_folded ()
{
  t /usr/bin/python3 - "$@" <<'EOF'
import re, sys
f, outer, inner = sys.argv[1:]
stacks = {}
for l in open(f).read().splitlines():
    assert re.fullmatch(r"[^ ;]+(;[^ ;]+)* [0-9]+", l), "not folded: %r" % l
    frames, v = l.rsplit(" ", 1)
    assert frames not in stacks, "stack twice: " + frames
    stacks[frames] = int(v)
s1, s2 = "read;" + outer, "read;%s;%s" % (outer, inner)
s3 = s2 + ";memory"
assert set(stacks) == {s1, s2, s3}, "stacks %s, expected %s" % (
    sorted(stacks), sorted([s1, s2, s3]))
delay = stacks[s1 if outer == "delay" else s2]
cache = stacks[s1 if outer == "cache" else s2]
assert 200000 <= delay <= 400000, "delay's self time %d us" % delay
assert cache < 20000, "cache's self time %d us" % cache
assert 0 < stacks[s3] < 20000, "memory's self time %d us" % stacks[s3]
EOF
}

layers delay cache
is_folded "$out" delay cache
layers cache delay
is_folded "$out" cache delay
