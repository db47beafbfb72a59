#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=exitwhen: each event stops an idle server (status 0) within
# a few exit-when-poll periods: a file created (also one there from the
# start: at once), a file deleted, a pipe's writer closing it, a
# process exiting, a script exiting 88 (a script exiting 3 is only
# logged).  With a client connected the server refuses new clients and
# exits only once that client has gone.  Bad values stop the server.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

sock="$tmpdir/sock"
uri="nbd+unix:///?socket=$sock"

# start ARGS...: a server with the filter; its pid in $pid.
start ()
{
  rm -f "$sock" "$tmpdir/pid"
  "$NBDKIT" -f -U "$sock" -P "$tmpdir/pid" --filter=exitwhen memory 1M \
    "$@" 2>> "$tmpdir/log" &
  pid=$!
  cleanup_fn _kill_pid "$pid"
}
started ()
{
  wait_for 20 -s "$tmpdir/pid" || fail "the server did not start"
}
# exits_within SECONDS: the server exits, with status 0.
exits_within ()
{
  local i
  for (( i = 0; i < $1 * 10; i++ )); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  ! kill -0 "$pid" 2>/dev/null || fail "the server is still running"
  wait "$pid" || fail "the server exited with status $?"
}
still_running ()
{
  sleep "$1"
  kill -0 "$pid" 2>/dev/null || fail "the server exited too early ($2)"
}

# A file there from the start: exit at once, even with a long poll.
touch "$tmpdir/stop"
start exit-when-file-created="$tmpdir/stop"
exits_within 10
rm "$tmpdir/stop"
echo "file there at start: exited"

# Created later, idle, polled every second.  The name is relative: it
# is resolved from the directory the server was started in.
cd "$tmpdir"
start exit-when-file-created=stop exit-when-poll=1
started
still_running 1.5 "no file yet"
touch "$tmpdir/stop"
exits_within 10
rm "$tmpdir/stop"
cd - > /dev/null
echo "file created: exited"

# Deleted.
touch "$tmpdir/keep"
start exit-when-file-deleted="$tmpdir/keep" exit-when-poll=1
started
still_running 1.5 "file still there"
rm "$tmpdir/keep"
exits_within 10
echo "file deleted: exited"

# A pipe: the server reads fd 3 from a FIFO that only the test writes.
mkfifo "$tmpdir/fifo"
exec 8<> "$tmpdir/fifo"
start exit-when-pipe-closed=3 exit-when-poll=1 3< "$tmpdir/fifo" 8>&-
started
echo "some data the filter must not mind" >&8
still_running 1.5 "pipe still open"
exec 8>&-
exits_within 10
echo "pipe closed: exited"

# A process.
sleep 60 &
sleeper=$!
cleanup_fn _kill_pid "$sleeper"
start exit-when-process-exits="$sleeper" exit-when-poll=1
started
still_running 1.5 "process still running"
kill "$sleeper"
exits_within 10
echo "process exited: exited"

# A script: 0 means no, 3 is an error that is logged, 88 means exit.
cat > "$tmpdir/check" <<SH
#!/bin/sh
[ -f "$tmpdir/bad" ] && exit 3
[ -f "$tmpdir/go" ] && exit 88
exit 0
SH
chmod +x "$tmpdir/check"
: > "$tmpdir/log"
start exit-when-script="$tmpdir/check" exit-when-poll=1
started
touch "$tmpdir/bad"
still_running 2.5 "script exited 3"
grep -q "exit status 3" "$tmpdir/log" ||
  { cat "$tmpdir/log"; fail "status 3 was not logged"; }
rm "$tmpdir/bad"
touch "$tmpdir/go"
exits_within 10
rm "$tmpdir/go"
echo "script: exited"

# A client connected: no exit while it stays, new clients are refused
# (checked at their connect, not by polling: exit-when-poll=600), and
# the exit follows the client's leaving.
start exit-when-file-created="$tmpdir/stop" exit-when-poll=600
started
nbdsh -u "$uri" -c "
import os, time
h.pwrite(b'still served', 0)
open('$tmpdir/a.up', 'w').close()
for i in range(300):
    if os.path.exists('$tmpdir/a.go'):
        break
    time.sleep(0.1)
assert h.pread(12, 0) == b'still served'
" &
client=$!
cleanup_fn _kill_pid "$client"
wait_for 20 -f "$tmpdir/a.up" || fail "client a did not connect"
t nbdinfo --size "$uri" > /dev/null || fail "a second client was refused early"
touch "$tmpdir/stop"
expect_fail t nbdinfo --size "$uri" 2> /dev/null
still_running 1 "a client is still connected"
touch "$tmpdir/a.go"
wait "$client" || fail "client a failed"
exits_within 10
echo "client connected: exited after it left"

# --- Bad parameters -------------------------------------------------------
for bad in exit-when-poll=x exit-when-poll=-1 exit-when-pipe-closed=99 \
           exit-when-pipe-closed=x exit-when-process-exits=0 \
           exit-when-process-exits=-5 exit-when-process-exits=999999999 \
           exit-when-file-created= exit-when-file-deleted=; do
  refuses "${bad%%=*}" --filter=exitwhen null "$bad" ||
    fail "$bad: not refused with one line naming ${bad%%=*}"
done
