#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sshd behind the ssh plugin dies (kill -9 of sshd and its sessions)
# while a client reads: the client's requests fail with EIO, the server
# stays up, a client that comes while sshd is down is refused, and once
# sshd is back the same server serves the right bytes again.  Then the
# same during a real nbdcopy (slowed by the delay filter so that the
# kill lands mid-copy): nbdcopy fails with EIO within seconds.
# It would catch a server that crashes, hangs or returns stale or zero
# bytes when the SFTP connection is lost.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdsh nbdinfo nbdcopy
start_sshd
disk="$tmpdir/disk"
head -c $(( 8 * 1024 * 1024 )) /dev/urandom > "$disk"

# A script the client runs to kill sshd mid-session.
declare -f kill_sshd > "$tmpdir/kill.sh"
echo "sshd_pid=$sshd_pid; kill_sshd" >> "$tmpdir/kill.sh"

start_ssh_server ssh "${sshd_args[@]}" "$disk" timeout=10
t nbdsh -u "$uri" -c "
import subprocess
with open('$disk', 'rb') as f:
    assert h.pread(1048576, 0) == f.read(1048576)
subprocess.run(['bash', '$tmpdir/kill.sh'], check=True)
for what in ('read', 'write', 'flush'):
    try:
        if what == 'read':
            h.pread(65536, 2 * 1048576)
        elif what == 'write':
            h.pwrite(b'x' * 4096, 0)
        else:
            h.flush()
        raise Exception(what + ' succeeded with sshd dead')
    except nbd.Error as e:
        assert e.errno == 'EIO', (what, e.errno)
" || fail "the client did not get EIO after sshd died"
kill -0 "$server_pid" || fail "the server died with sshd"

# sshd is down: a new client is refused, the server stays up.
expect_fail t nbdinfo --size "$uri" 2>/dev/null ||
  fail "a client was served with sshd down"
kill -0 "$server_pid" || fail "the server died on a refused client"

# sshd is back: the same server serves the file again.
launch_sshd
t nbdcopy "$uri" "$tmpdir/out" || fail "no copy after sshd came back"
cmp "$disk" "$tmpdir/out" || fail "wrong bytes after sshd came back"
stop_ssh_server

# During a real copy.
start_ssh_server --filter=delay ssh "${sshd_args[@]}" "$disk" rdelay=30ms \
  timeout=10
t nbdcopy --requests=4 "$uri" "$tmpdir/out2" 2> "$tmpdir/copy.err" &
copy=$!
sleep 1
kill -0 "$copy" || fail "nbdcopy ended before sshd was killed"
kill_sshd
status=0
wait "$copy" || status=$?
cat "$tmpdir/copy.err"
[ "$status" -ne 0 ] || fail "nbdcopy succeeded with sshd killed mid-copy"
[ "$status" -ne 124 ] && [ "$status" -ne 137 ] || fail "nbdcopy hung"
grep -q "Input/output error" "$tmpdir/copy.err" ||
  fail "nbdcopy did not see EIO"
kill -0 "$server_pid" || fail "the server died during the copy"
stop_ssh_server
