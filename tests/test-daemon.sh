#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Without -f the server daemonises: the command returns at once with
# status 0, the pidfile names a live process that serves, and killing it
# stops the service.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

sock="$tmpdir/sock"
pidfile="$tmpdir/pid"
t "$NBDKIT" -U "$sock" -P "$pidfile" memory 1M </dev/null
wait_for 10 -s "$pidfile" || fail "no pidfile after daemonising"
pid="$(cat "$pidfile")"
cleanup_fn _kill_pid "$pid"
echo "daemon pid $pid"
kill -0 "$pid" || fail "daemon $pid not running"
wait_for 5 -S "$sock" || fail "no socket"
t nbdinfo --size "nbd+unix:///?socket=$sock" | grep -qx 1048576

# Daemonised: not our child and in its own session.
ppid="$(ps -o ppid= -p "$pid" | tr -d ' ')"
[ "$ppid" != "$$" ] || fail "daemon is still a child of the test"

kill "$pid"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then fail "daemon survived SIGTERM"; fi
