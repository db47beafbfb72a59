#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin takes the server's asynchronous path, seen by bpftrace:
# for 64 reads sent together to a proxy with -t 2 (the upstream holds
# each 50 ms), the server fires request_submit and request_complete
# for each of them (with error 0), at least 32 are in flight at once
# between the two, and the plugin's nbd_request_done fires for each with
# the connection id, the request's cookie and its count as on the
# synchronous path (and nbd_request_error never).
# With -D nbdkit.async=0 request_submit does not fire at all.
# Catches: the plugin not exporting nbdkit_async_ops (or the server not
# using them), completions that never reach the server, requests that
# go upstream one at a time.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_tracer python3

so="$abs_top_builddir/plugins/nbd/.libs/nbdkit-nbd-plugin.so"
start_upstream -t 64 --filter=delay memory 4M delay-read=50ms

cat > "$tmpdir/burst.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
bufs = [nbd.Buffer(4096) for i in range(64)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()
PY

cat > "$tmpdir/trace.bt" <<BT
usdt:$server_binary:nbdkit:request_submit /arg2 == 0/ {
  @submit = count(); @now = @now + 1;
  if (@now > @most) { @most = @now; }
}
usdt:$server_binary:nbdkit:request_complete {
  @complete[arg2] = count(); @now = @now - 1;
}
usdt:$so:nbdkit:nbd_request_done /str(arg2) == "pread"/ {
  @done[arg0 > 0, arg1 > 0, arg5] = count();
}
usdt:$so:nbdkit:nbd_request_error { @error = count(); }
BT

# run ARGS...: the burst through a proxy with server options ARGS,
# traced; the tracer's report in $tmpdir/trace.
run ()
{
  start_server -t 2 "$@" nbd socket="$up_sock"
  start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"
  t python3 "$tmpdir/burst.py" "$uri" || fail "the reads failed ($*)"
  interrupt_tracer "$bt"
  stop_server
  echo "$*:"
  cat "$tmpdir/trace"
}

run
grep -qx '@submit: 64' "$tmpdir/trace" || fail "request_submit did not fire 64 times"
grep -qx '@complete\[0\]: 64' "$tmpdir/trace" ||
  fail "request_complete did not fire 64 times with no error"
most=$(sed -n 's/^@most: //p' "$tmpdir/trace")
[ "${most:-0}" -ge 32 ] || fail "only ${most:-0} requests were in flight at once"
grep -qx '@done\[1, 1, 4096\]: 64' "$tmpdir/trace" ||
  fail "nbd_request_done did not fire 64 times with id, cookie and count"
! grep -q '^@error: [1-9]' "$tmpdir/trace" || fail "nbd_request_error fired"

run -D nbdkit.async=0
! grep -q '^@submit: [1-9]' "$tmpdir/trace" ||
  fail "request_submit fired with -D nbdkit.async=0"
grep -qx '@done\[1, 1, 4096\]: 64' "$tmpdir/trace" ||
  fail "-D nbdkit.async=0: nbd_request_done did not fire 64 times"
