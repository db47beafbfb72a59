#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A whole connection's life through a filter and a plugin, as bpftrace
# sees it, compared line by line with an expected-output file (as
# CPython's DTrace/SystemTap tests do): probes-sequence.bt prints every
# connection, handshake, worker, request, reply and layer probe with the
# arguments that do not vary between runs (the socket probes' count
# does), and probes-sequence.expected is what one
# synchronous nbdsh client (a write, a read, a clean shutdown) through
# --filter=offset into memory must produce.  A probe that stops firing,
# fires twice, moves, or changes an argument shows up in the diff.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

start_server --filter=offset memory 2M offset=1M

start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" \
  "$srcdir/probes-sequence.bt" "$server_binary"

t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 512, 4096)
assert h.pread(512, 4096) == b"x" * 512
h.shutdown()'
sleep 1
interrupt_tracer "$bt"

trace_in_order "$tmpdir/out" \
  > "$tmpdir/got"
diff -u "$srcdir/probes-sequence.expected" "$tmpdir/got" ||
  fail "the probe sequence differs from probes-sequence.expected"
