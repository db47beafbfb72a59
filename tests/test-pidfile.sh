#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -P PIDFILE: the file holds the server's pid once it is listening, and
# it is still there, with the same pid, after the server has exited,
# as nbdkit(1) -P promises ("nbdkit does not delete the file when it
# exits"): scripts read the pid after the server is gone.  The same in
# captive mode, where Debian's nbdkit is run alongside for comparison.
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

# SIGTERM: the server exits normally, removes its socket, keeps the
# pid file.
stop_server
kill -0 "$pid_in_file" 2>/dev/null && fail "the server did not exit"
[ ! -e "$sock" ] || fail "the Unix socket was left behind"
[ -f "$pidfile" ] || fail "the pid file was deleted at exit"
[ "$(cat "$pidfile")" = "$pid_in_file" ] ||
  fail "the pid file changed at exit: $(cat "$pidfile")"

# Captive mode: the file outlives the server too, as with nbdkit.
for server in "$NBDKIT" /usr/bin/nbdkit; do
  [ -x "$server" ] || continue
  rm -f "$tmpdir/run.pid"
  t "$server" -U - -P "$tmpdir/run.pid" null size=1M \
    --run 'nbdinfo --size "$uri" > /dev/null' ||
    fail "$server: --run failed"
  [ -s "$tmpdir/run.pid" ] ||
    fail "$server: the pid file was deleted when --run ended"
  grep -Eqx '[0-9]+' "$tmpdir/run.pid" ||
    fail "$server: pid file content '$(cat "$tmpdir/run.pid")'"
done
