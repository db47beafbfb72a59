#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin's probes fire with the right arguments (bpftrace on
# the plugin's .so, by path, as ssh_connect also fires at start-up):
#   ssh_connect (id, host, user, duration ns, result): at start-up with
#     id 0, then for the client's connection; -1 for a refused key;
#   ssh_read_done, ssh_write_done (id, cookie, offset, count, latency ns,
#     errno) and ssh_flush_done (id, cookie, latency ns, errno): for the
#     client's requests, with the same id as its connect, then errno 5
#     (EIO) for a read once sshd is gone;
#   ssh_sftp_error (id, cookie, status, message): status 2 and the
#     server's message for a missing file (id and cookie 0), status 0
#     for a lost connection, with the id and cookie of the failed read
#     (those of its ssh_read_done).
# It would catch a probe not fired, fired with arguments out of order
# or with wrong values, or missing on an error path.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_tracer nbdsh
start_sshd
disk="$tmpdir/disk"
head -c $(( 1024 * 1024 )) /dev/urandom > "$disk"

so="$abs_top_builddir/plugins/ssh/.libs/nbdkit-ssh-plugin.so"
[ -f "$so" ] || fail "$so not built"
cat > "$tmpdir/trace.bt" <<EOF
usdt:$so:nbdkit:ssh_connect {
  printf("connect %d %s %s %d %d\n", arg0, str(arg1), str(arg2),
         arg3 > 0, arg4); }
usdt:$so:nbdkit:ssh_read_done {
  printf("read %d %d %d %d %d %d\n", arg0, arg1 > 0, arg2, arg3,
         arg4 > 0, arg5);
  printf("read_cookie %d %d %d\n", arg0, arg1, arg2); }
usdt:$so:nbdkit:ssh_write_done {
  printf("write %d %d %d %d %d %d\n", arg0, arg1 > 0, arg2, arg3,
         arg4 > 0, arg5); }
usdt:$so:nbdkit:ssh_flush_done {
  printf("flush %d %d %d %d\n", arg0, arg1 > 0, arg2 > 0, arg3); }
usdt:$so:nbdkit:ssh_sftp_error {
  printf("sftp_error %d %d %d %s\n", arg0, arg1, arg2, str(arg3)); }
EOF
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

# A missing file and a refused key, at start-up.
expect_fail t "$NBDKIT" -U - ssh "${sshd_args[@]}" "$tmpdir/missing" \
  --run true 2>/dev/null
ssh-keygen -q -t ed25519 -N '' -f "$tmpdir/other_key"
expect_fail t "$NBDKIT" -U - ssh host=127.0.0.1 port="$sshd_port" user=root \
  config= known-hosts="$sshd_known_hosts" identity="$tmpdir/other_key" \
  "$disk" --run true 2>/dev/null

# A client's read, write and flush; then sshd dies and a read fails.
declare -f kill_sshd > "$tmpdir/kill.sh"
echo "sshd_pid=$sshd_pid; kill_sshd" >> "$tmpdir/kill.sh"
start_ssh_server ssh "${sshd_args[@]}" "$disk"
t nbdsh -u "$uri" -c "
import subprocess
h.pread(512, 4096)
h.pwrite(b'x' * 4096, 8192)
h.flush()
subprocess.run(['bash', '$tmpdir/kill.sh'], check=True)
try:
    h.pread(512, 65536)
    raise Exception('read succeeded with sshd dead')
except nbd.Error:
    pass
" || fail "the client failed"
stop_ssh_server
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/trace"

expect_line ()
{
  grep -Eqx "$1" "$tmpdir/trace" || fail "no line matching: $1"
}
# Start-up checks (id 0): the missing file, the refused key, the good one.
expect_line "sftp_error 0 0 2 SFTP server: No such file"
expect_line "connect 0 127.0.0.1 root 1 -1"
[ "$(grep -c '^connect 0 127.0.0.1 root 1 0$' "$tmpdir/trace")" -ge 2 ] ||
  fail "fewer than two good connects at start-up"
# The client's connection: its id joins connect and requests.
id="$(awk '$1 == "connect" && $2 != 0 && $6 == 0 { print $2; exit }' \
  "$tmpdir/trace")"
[ -n "$id" ] || fail "no ssh_connect for the client's connection"
expect_line "read $id 1 4096 512 1 0"
expect_line "write $id 1 8192 4096 1 0"
expect_line "flush $id 1 1 0"
cookie="$(awk -v id="$id" '$1 == "read_cookie" && $2 == id && $4 == 65536 {
  print $3 }' "$tmpdir/trace")"
[ -n "$cookie" ] && [ "$cookie" != 0 ] || fail "no ssh_read_done at 65536"
expect_line "sftp_error $id $cookie 0 the connection to the server is lost"
expect_line "read $id 1 65536 512 1 5"
