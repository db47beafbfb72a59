#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A slow reader cannot make the server hold unbounded memory.  One
# client sends 64 reads of 32 MiB and reads none of the replies; the
# server's RSS (VmRSS sampled every 5 ms, and VmHWM) may grow by the
# 512 MiB that one connection's reads and writes in flight may hold
# (docs/nbdkit-security.pod, "Request payload"; hold_payload in
# server/request.c), plus a margin, while another client is served in
# full.  Then the slow reader takes its 64 replies (all there, all
# zero) and the memory goes back well below the stalled level.
#
# The delay filter makes every read wait 20 ms, so the worker pool
# grows to -t 64 workers: without the per-connection cap they would
# hold 64 x 32 MiB = 2 GiB (Debian's nbdkit 1.32 grows so and aborts);
# with it, 16 of them hold 512 MiB and the rest wait.  A server that
# passes the bound by 256 MiB is killed at once, so a broken one does
# not take the machine's memory.
source "$(dirname "$0")/../functions.sh"
here="$(cd "$(dirname "$0")" && pwd)"
requires test -x /usr/bin/python3

# The rule: 512 MiB of large buffers in flight per connection.  The
# margin covers thread stacks, malloc's bookkeeping, the other client's
# small buffers and, in a sanitizer build, AddressSanitizer's shadow of
# the buffers (one byte per eight).  After the replies the memory must
# be well below the stalled level, but not all of it goes back: glibc
# serves buffers of up to 32 MiB from its per-thread arenas, and keeps
# a freed one there while a smaller allocation sits above it (measured
# 40 to 170 MiB after a first burst; later bursts reuse it), and
# AddressSanitizer's quarantine keeps up to 256 MiB more.  The
# server must also grow by half the cap at least: otherwise the load
# did not reach it and the bound proves nothing.
cap=512
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  bound=$(( cap + cap / 8 + 64 )) after=$(( 128 + 256 + cap / 8 ))
else
  bound=$(( cap + 64 )) after=$(( cap / 2 ))
fi

start_server -t 64 --filter=delay memory 1G rdelay=20ms
t /usr/bin/python3 "$here/resources-client.py" slow-reader \
  "$sock" "$server_pid" --reads 64 --size 32 --export-size $((1 << 30)) \
  --bound "$bound" --floor $(( cap / 2 )) --after-margin "$after" ||
  fail "the slow reader's memory was not bounded (see above)"
kill -0 "$server_pid" || fail "the server died"
