#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin never waits for a silent server longer than timeout=:
# with sshd stopped (SIGSTOP) at start-up, the plugin gives up with one
# line and exit status 1; with the session serving a client stopped
# mid-way, the client's next read fails with EIO after about timeout=
# seconds (libssh 0.10 itself would wait for ever: the plugin's
# watchdog closes the socket), and the server stays up.
# It would catch a hang at connection time or on a request.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdsh nbdinfo
start_sshd
# Stopped processes only die of SIGKILL: leave none behind.
cleanup_fn kill_sshd
disk="$tmpdir/disk"
head -c $(( 1024 * 1024 )) /dev/urandom > "$disk"

# A server that accepts the TCP connection but never speaks.
kill -STOP "$sshd_pid"
start=$SECONDS
status=0
timeout -k 5 30 "$NBDKIT" -U - ssh "${sshd_args[@]}" "$disk" timeout=2 \
  --run 'nbdinfo --size "$uri"' 2> "$tmpdir/err" || status=$?
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "stopped sshd at start-up: exit status $status"
(( SECONDS - start <= 10 )) || fail "gave up after $((SECONDS - start)) s"
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "not one line"
grep -q "Timeout connecting" "$tmpdir/err" || fail "no word of the timeout"
kill -CONT "$sshd_pid"

# A session that stops answering mid-way.
start_ssh_server ssh "${sshd_args[@]}" "$disk" timeout=2
cat > "$tmpdir/stop.sh" <<EOF
for p in \$(pgrep -P $sshd_pid); do kill -STOP \$p \$(pgrep -P \$p); done
EOF
t nbdsh -u "$uri" -c "
import subprocess, time
with open('$disk', 'rb') as f:
    assert h.pread(65536, 0) == f.read(65536)
subprocess.run(['bash', '$tmpdir/stop.sh'], check=True)
t0 = time.monotonic()
try:
    h.pread(65536, 65536)
    raise Exception('a read succeeded with the session stopped')
except nbd.Error as e:
    assert e.errno == 'EIO', e.errno
took = time.monotonic() - t0
assert 1.5 <= took <= 8, took
" || fail "no EIO within the timeout from a stopped session"
kill -0 "$server_pid" || fail "the server died"
stop_ssh_server
