#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Out of file descriptors, the server rests instead of spinning, says
# so once in its log, and serves again once clients go.
#
# The server runs under ulimit -n 64; a raw client opens 200
# connections that never answer the greeting, so the server takes what
# it can (about 55) and the rest wait in the listen backlog, where
# accept fails with EMFILE.  Over 3 s of that the server's CPU time
# (utime + stime from /proc/PID/stat) must stay under 0.3 s: Debian's
# nbdkit 1.32 retries accept at once and spends 2.5 s of the 3 on it,
# logging a million lines.  A real client (nbdsh) then arrives, queued
# behind the flood; once the flood closes it must be served.  The log
# must report each episode once when it starts and once when it ends,
# and the server's descriptors must come back to their count before.
source "$(dirname "$0")/../functions.sh"
here="$(cd "$(dirname "$0")" && pwd)"
requires test -x /usr/bin/python3
requires_cmd nbdsh

sock="$tmpdir/sock"
pidfile="$tmpdir/server.pid"
log="$tmpdir/server.log"
( ulimit -n 64 && exec "$NBDKIT" -f -U "$sock" -P "$pidfile" memory 64M ) \
  2>"$log" 9>&- &
server_pid=$!
cleanup_fn _kill_pid "$server_pid"
wait_for 20 -s "$pidfile" || fail "the server did not start"
wait_for 5 -S "$sock" || fail "the server did not create $sock"
uri="nbd+unix:///?socket=$sock"
[ "$(awk '/^Max open files/ { print $4 }' "/proc/$server_pid/limits")" = 64 ] ||
  fail "the server does not run under ulimit -n 64"
fds_before=$(ls "/proc/$server_pid/fd" | wc -l)

t /usr/bin/python3 "$here/resources-client.py" flood "$sock" "$server_pid" \
  --flood 200 --cpu-secs 3 --cpu-max 0.3 --client-timeout 20 -- \
  nbdsh -u "$uri" -c '
h.pwrite(b"served after EMFILE" * 27, 4096)
assert h.pread(513, 4096) == b"served after EMFILE" * 27
' || fail "see above"
kill -0 "$server_pid" || fail "the server died"

# The descriptors of the flood and of the connections it left in the
# backlog all go back.
for (( i = 0; i < 100; i++ )); do
  fds_after=$(ls "/proc/$server_pid/fd" | wc -l)
  [ "$fds_after" -le "$fds_before" ] && break
  sleep 0.1
done
echo "figure: fds_before $fds_before"
echo "figure: fds_after $fds_after"
[ "$fds_after" -le "$fds_before" ] ||
  fail "the server holds $fds_after fds, $fds_before before the flood"

stop_server
echo "server log:"
sed -n '1,20p' "$log"
started=$(grep -c 'accept: Too many open files (not accepting for a while)$' \
            "$log" || :)
ended=$(grep -c 'accept: Too many open files for [0-9.]* s: accepting again$' \
          "$log" || :)
lines=$(wc -l < "$log")
echo "figure: emfile_episodes $started"
[ "$started" -ge 1 ] || fail "running out of descriptors was not logged"
[ "$ended" -eq "$started" ] ||
  fail "out of descriptors $started time(s), but the end logged $ended time(s)"
[ "$lines" -le 40 ] || fail "$lines lines logged: once per attempt?"
