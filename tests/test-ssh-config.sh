#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin's other parameters, against a real sshd:
# - config=FILE: a Host alias in an SSH client config gives the host
#   name, user, key and known hosts; port= on the command line wins
#   over the file's Port (which points nowhere);
# - identity= twice: a key the server refuses, then the right one;
# - compression=true: zlib is negotiated (-D ssh.log=2 shows libssh's
#   own log lines) and the bytes are the same.
# It would catch a config file not read, parameters that lose to it,
# only the first identity tried, compression= ignored.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdcopy nbdinfo
start_sshd
unset SSH_AUTH_SOCK
disk="$tmpdir/disk"
head -c $(( 2 * 1024 * 1024 + 7 )) /dev/urandom > "$disk"
size=$(stat -c %s "$disk")

cat > "$tmpdir/config" <<EOF
Host sshtest
  HostName 127.0.0.1
  Port 1
  User root
  IdentityFile $sshd_key
  UserKnownHostsFile $sshd_known_hosts
EOF
[ "$(t "$NBDKIT" -U - ssh host=sshtest config="$tmpdir/config" \
       port="$sshd_port" "$disk" --run 'nbdinfo --size "$uri"')" = "$size" ] ||
  fail "config=FILE with port= did not connect"
# Without port= the file's Port 1 is used, and refused.
expect_fail t "$NBDKIT" -U - ssh host=sshtest config="$tmpdir/config" \
  "$disk" --run true 2> "$tmpdir/err" || fail "the file's Port was not used"
grep -q "port\|refused" "$tmpdir/err" || fail "unexpected: $(cat "$tmpdir/err")"

ssh-keygen -q -t ed25519 -N '' -f "$tmpdir/other_key"
[ "$(t "$NBDKIT" -U - ssh host=127.0.0.1 port="$sshd_port" user=root \
       config= known-hosts="$sshd_known_hosts" \
       identity="$tmpdir/other_key" identity="$sshd_key" \
       "$disk" --run 'nbdinfo --size "$uri"')" = "$size" ] ||
  fail "the second identity= was not tried"

t "$NBDKIT" -v -D ssh.log=2 -U - ssh "${sshd_args[@]}" compression=true \
  "$disk" --run "nbdcopy \"\$uri\" $tmpdir/out" 2> "$tmpdir/log" ||
  { tail "$tmpdir/log"; fail "compression=true failed"; }
cmp "$disk" "$tmpdir/out" || fail "compression=true: bytes differ"
grep -q "libssh.*Negotiated.*zlib" "$tmpdir/log" ||
  fail "compression=true: no zlib in libssh's log"
