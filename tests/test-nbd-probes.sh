#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin's probes, seen by bpftrace on the plugin's .so:
# nbd_connect (connection id, upstream, duration, errno) for each
# connection attempt, nbd_reconnect (id, attempt, errno) before each
# retry, nbd_request_done (id, cookie, operation, latency, offset,
# count) for each request, and before it nbd_request_error (id, cookie,
# operation, errno) with the upstream's error (ENOSPC from the error
# filter) when it fails.
# Catches: a probe that does not fire, or fires with its arguments out
# of place (the cookie or errno missing, offset and count swapped).
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_tracer nbdsh nbdinfo

so="$abs_top_builddir/plugins/nbd/.libs/nbdkit-nbd-plugin.so"
[ -f "$so" ] || fail "$so not built"
start_upstream --filter=error memory 1M error-pread=ENOSPC \
  error-pread-rate=100% error-pread-file="$tmpdir/fail-reads"

printf '%s\n' "
usdt:$so:nbdkit:nbd_connect {
  printf(\"connect %d %s %d %d\\n\", arg0 > 0, str(arg1), arg2 > 0, arg3); }
usdt:$so:nbdkit:nbd_reconnect {
  printf(\"reconnect %d %d %d\\n\", arg0 > 0, arg1, arg2); }
usdt:$so:nbdkit:nbd_request_done {
  printf(\"request %d %d %s %d %d %d\\n\", arg0 > 0, arg1 > 0, str(arg2),
         arg3 > 0, arg4, arg5); }
usdt:$so:nbdkit:nbd_request_error {
  printf(\"error %d %d %s %d\\n\", arg0 > 0, arg1 > 0, str(arg2), arg3); }" > "$tmpdir/trace.bt"
start_bpftrace 90 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - nbd socket="$up_sock" --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"p\" * 4096, 8192)
h.pread(512, 1024)
h.flush()
h.zero(65536, 131072)
open(\"'"$tmpdir/fail-reads"'\", \"w\").close()
try:
    h.pread(512, 0)
    raise Exception(\"the read did not fail\")
except nbd.Error as e:
    assert e.errno == \"ENOSPC\", e.errno
"'
expect_fail t "$NBDKIT" -U - nbd socket="$tmpdir/nothing" retry=1 \
  --run 'nbdinfo --size "$uri"' 2>/dev/null
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/trace"

want ()
{
  grep -qxF "$1" "$tmpdir/trace" || fail "no probe line: $1"
}
want "connect 1 unix:$up_sock 1 0"
want "request 1 1 pwrite 1 8192 4096"
want "request 1 1 pread 1 1024 512"
want "request 1 1 flush 1 0 0"
want "request 1 1 zero 1 131072 65536"
want "request 1 1 pread 1 0 512"
want "error 1 1 pread 28"
[ "$(grep -c '^error ' "$tmpdir/trace")" = 1 ] ||
  fail "nbd_request_error fired for a request that did not fail"
want "connect 1 unix:$tmpdir/nothing 1 2"
want "reconnect 1 1 2"
[ "$(grep -c "^connect 1 unix:$tmpdir/nothing " "$tmpdir/trace")" = 2 ] ||
  fail "not two attempts with retry=1"
