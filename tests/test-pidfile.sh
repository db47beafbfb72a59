#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -P PIDFILE: the file holds the server's pid once it is listening,
# and the server removes nothing it should not.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

start_server memory 1M
pid_in_file="$(cat "$pidfile")"
echo "pidfile says $pid_in_file, we started $server_pid"
case "$pid_in_file" in ''|*[!0-9]*) fail "pidfile content '$pid_in_file'";; esac
# The wrapper script execs the server, so the pids agree.
[ "$pid_in_file" -eq "$server_pid" ] || fail "pidfile has the wrong pid"
kill -0 "$pid_in_file" || fail "pid $pid_in_file is not running"
t nbdinfo --size "$uri" | grep -qx 1048576
