#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# SIGTERM and SIGINT stop the server gracefully.  With a write
# acknowledged and a 2-second read in progress, the signal must:
#   - stop accepting at once (a new client is refused while the read
#     is still running),
#   - let the read finish and its reply (with the written data) reach
#     the client,
#   - then flush and close the plugin, unload it, and exit 0.
# The fault plugin logs its calls; the log must read, in order,
#   ... pwrite, pread, pread-done, flush, close, unload.
# A client that hung up before the signal gets no flush (below).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

plugin="$abs_builddir/.libs/fault-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"

# The plugin calls that matter here, in the order LOG has them.
plugin_calls ()
{
  grep -E '^(pwrite|pread|pread-done|flush|close|unload)$' "$1" | tr '\n' ' '
}

for sig in TERM INT; do
  log="$tmpdir/calls-$sig"
  : > "$log"
  start_server "$plugin" delay=pread delay-ms=2000 log="$log"

  # The client: an acknowledged write, then a slow read of it.
  t nbdsh -u "$uri" -c '
h.pwrite(b"drain" * 100, 4096)
assert h.pread(500, 4096) == b"drain" * 100, "slow read came back wrong"
print("client: slow read answered")
' > "$tmpdir/client.out" 2>&1 &
  client=$!
  cleanup_fn _kill_pid "$client"

  wait_for_output "$log" '^pread$' "$client" ||
    { cat "$tmpdir/client.out"; fail "SIG$sig: the slow read never started"; }
  kill -s "$sig" "$server_pid"

  # No new clients while the read drains.
  sleep 0.3
  if t nbdsh -u "$uri" -c 'pass' 2>/dev/null; then
    fail "SIG$sig: a new client was accepted after the signal"
  fi
  grep -q '^pread-done$' "$log" &&
    fail "SIG$sig: the read finished before the refusal (test too slow)"

  status=0
  wait "$client" || status=$?
  cat "$tmpdir/client.out"
  [ "$status" -eq 0 ] || fail "SIG$sig: the client lost its reply ($status)"

  status=0
  wait "$server_pid" || status=$?
  server_pid=
  [ "$status" -eq 0 ] || fail "SIG$sig: the server exited with $status"
  [ ! -e "$sock" ] || fail "SIG$sig: the socket was left behind"

  echo "SIG$sig: plugin calls:" $(cat "$log")
  order="$(plugin_calls "$log")"
  [ "$order" = "pwrite pread pread-done flush close unload " ] ||
    fail "SIG$sig: plugin calls out of order: $order"
done

# A client that has already hung up is not cut off by the stop: its
# connection ends as it would have without the signal (no flush, as
# with Debian's nbdkit), even though its last read is still running.
# Before, the stop flushed every connection whose thread had not yet
# seen the hang-up, so a --run command's last client got a flush or
# not depending on who won the race.
log="$tmpdir/calls-gone"
: > "$log"
start_server "$plugin" delay=pread delay-ms=2000 log="$log"
t nbdsh -u "$uri" -c '
h.pwrite(b"gone" * 100, 4096)
h.aio_pread(nbd.Buffer(400), 4096)   # sent at once; then hang up
' > "$tmpdir/client.out" 2>&1 || { cat "$tmpdir/client.out"; fail "gone: client failed"; }
wait_for_output "$log" '^pread$' "$server_pid" ||
  fail "gone: the slow read never started"
grep -q '^pread-done$' "$log" && fail "gone: the read finished too soon (test too slow)"
kill -s TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
[ "$status" -eq 0 ] || fail "gone: the server exited with $status"
echo "gone: plugin calls:" $(cat "$log")
order="$(plugin_calls "$log")"
[ "$order" = "pwrite pread pread-done close unload " ] ||
  fail "gone: plugin calls: $order (expected no flush)"
