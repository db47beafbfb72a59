#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A client that hangs up with asynchronous requests in flight in the
# nbd plugin, against an upstream that holds reads 10 s: the server is
# asked to cancel, drops that client's upstream connection within about
# a second (not after 10 s) so that every request completes, closes the
# connection, keeps no descriptor, and still serves.  Under valgrind,
# such a hang-up leaks nothing and the server exits cleanly.
# Catches: a crash or a use after free when completions race the end of
# the connection, a close waiting for the upstream's slow replies, a
# leaked upstream connection or poller.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd python3 nbdsh

# (The upstream holds reads, not writes: the checks here write.)
# N reads and N writes sent, taken in by the server, then gone without
# NBD_CMD_DISC.
cat > "$tmpdir/hangup.py" <<'PY'
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
n = int(sys.argv[2])
bufs = [nbd.Buffer(4096) for i in range(n)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
    h.aio_pwrite(b"w" * 4096, 1048576 + i * 4096)
for i in range(30):
    h.poll(10)
os._exit(0)
PY

start_upstream -t 64 --filter=delay memory 4M delay-read=10
fds () { ls "/proc/$server_pid/fd" | wc -l; }
start_server -v nbd socket="$up_sock" 2> "$tmpdir/log"
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0)'
wait_for_output "$tmpdir/log" 'closed connection 1' "$server_pid" 20 ||
  fail "the first connection did not close"
before=$(fds)

start=$SECONDS
for i in 1 2 3; do
  t python3 "$tmpdir/hangup.py" "$uri" 16
done
for (( i = 0; i < 100; i++ )); do
  [ "$(grep -c 'closed connection [234] ' "$tmpdir/log")" -eq 3 ] && break
  sleep 0.1
done
grep -E 'cancel|dropping|error' "$tmpdir/log" | grep -v 'Transport endpoint' || :
[ "$(grep -c 'async: .* requests in flight at the end: cancelling' "$tmpdir/log")" -ge 3 ] ||
  fail "the plugin was not asked to cancel"
[ "$(grep -c 'dropping the upstream connection' "$tmpdir/log")" -ge 3 ] ||
  fail "the hung-up clients' upstream connections were not dropped"
[ "$(grep -c 'closed connection [234] ' "$tmpdir/log")" -eq 3 ] ||
  fail "the connections did not close"
(( SECONDS - start < 8 )) || fail "the hang-ups took $((SECONDS - start)) s to end"
kill -0 "$server_pid" || fail "the server died"
after=$(fds)
[ "$after" -le "$before" ] ||
  fail "the server had $before descriptors before and $after after"
t nbdsh -u "$uri" -c 'h.pwrite(b"y" * 512, 4096); h.flush()' ||
  fail "the server no longer serves"
stop_server

# Under valgrind: the hang-up leaks nothing and the server exits 0.
if command -v valgrind >/dev/null && [ -z "${NBDKIT_SANITIZERS:-}" ]; then
  export NBDKIT_VALGRIND=1 NBDKIT_VALGRIND_LOG="$tmpdir/vg.%p"
  TEST_CMD_TIMEOUT=240
  status=0
  t "$NBDKIT" -U - nbd socket="$up_sock" \
    --run 'python3 "'"$tmpdir"'/hangup.py" "$uri" 8' || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$tmpdir"/vg.* >&2
    fail "under valgrind: exit status $status"
  fi
  grep -h "ERROR SUMMARY\|definitely lost" "$tmpdir"/vg.* || fail "no valgrind report"
  grep -q 'definitely lost: [1-9]' "$tmpdir"/vg.* && {
    cat "$tmpdir"/vg.* >&2; fail "under valgrind: a leak"; }
  grep -q 'Invalid \(read\|write\)' "$tmpdir"/vg.* && {
    cat "$tmpdir"/vg.* >&2; fail "under valgrind: an invalid access"; }
fi
:
