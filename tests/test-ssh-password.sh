#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin logs in with a password given as password=+FILE,
# password=- (standard input) and password=-FD, and a wrong password
# stops it at start-up with one line and exit status 1.  The sshd of
# this test checks passwords against a private copy of /etc/shadow
# mounted in its own mount namespace (tests/sshd-start.sh): root's
# real password is never read or changed.  No identity is given and
# the agent is unset, so only the password can let the plugin in.
# It would catch a password not sent, read wrongly (a trailing
# newline kept), or a failed login that hangs or serves.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdinfo
requires unshare -m true
start_sshd password
unset SSH_AUTH_SOCK
disk="$tmpdir/disk"
head -c 12345 /dev/urandom > "$disk"
common=(host=127.0.0.1 port="$sshd_port" user=root config=
        known-hosts="$sshd_known_hosts" "$disk")
echo "$sshd_password" > "$tmpdir/password"
chmod 600 "$tmpdir/password"

size_with ()
{
  t "$NBDKIT" -U - ssh "${common[@]}" "$@" --run 'nbdinfo --size "$uri"'
}

[ "$(size_with password=+"$tmpdir/password")" = 12345 ] ||
  fail "password=+FILE did not log in"
[ "$(size_with password=- < "$tmpdir/password")" = 12345 ] ||
  fail "password=- did not log in"
[ "$(size_with password=-3 3< "$tmpdir/password")" = 12345 ] ||
  fail "password=-FD did not log in"
[ "$(size_with password="$sshd_password")" = 12345 ] ||
  fail "password=PASSWORD did not log in"

# Without a password there is no way in.
status=0
size_with > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "no password: exit status $status"

# A wrong password: one line, exit status 1, not served.
echo wrong-password > "$tmpdir/wrong"
status=0
size_with password=+"$tmpdir/wrong" > "$tmpdir/out" 2> "$tmpdir/err" ||
  status=$?
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "wrong password: exit status $status"
[ ! -s "$tmpdir/out" ] || fail "wrong password: a client was served"
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "wrong password: not one line"
grep -q "refused the login of root (tried: publickey password" "$tmpdir/err" ||
  fail "wrong password: the line does not say what was tried"
