#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin refuses a server it cannot trust or that refuses it,
# at start-up, with one line on stderr and exit status 1, quickly (no
# hang): a host key that differs from the known hosts file's, a host
# missing from it, a key the server does not accept, a port where
# nothing listens.  verify-remote-host=false skips the host key check.
# It would catch a plugin that serves a server with the wrong key, one
# that hangs, or that reports the failure only when a client comes.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdinfo
start_sshd
unset SSH_AUTH_SOCK
disk="$tmpdir/disk"
head -c 65536 /dev/urandom > "$disk"

# expect_one_line WHAT REGEX ARGS...: the server must fail within 20 s
# with exit status 1 and one line on stderr matching REGEX.
expect_one_line ()
{
  local what="$1" regex="$2" status=0 start=$SECONDS
  shift 2
  timeout -k 5 20 "$NBDKIT" -U - ssh "$@" --run 'nbdinfo --size "$uri"' \
    > "$tmpdir/out" 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "$what: exit status $status, expected 1"
  [ ! -s "$tmpdir/out" ] || fail "$what: a client was served"
  [ "$(wc -l < "$tmpdir/err")" -eq 1 ] || fail "$what: not one line"
  grep -Eq "^nbdkit: ssh: error: .*$regex" "$tmpdir/err" ||
    fail "$what: the line does not say '$regex'"
  (( SECONDS - start < 15 )) || fail "$what: took $((SECONDS - start)) s"
}

# The right host key, written for another one: a changed key.
ssh-keygen -q -t ed25519 -N '' -f "$tmpdir/other_key"
echo "[127.0.0.1]:$sshd_port $(cat "$tmpdir/other_key.pub")" \
  > "$tmpdir/wrong_known_hosts"
common=(host=127.0.0.1 port="$sshd_port" user=root config=
        identity="$sshd_key" "$disk")
expect_one_line "changed host key" "does not match" \
  "${common[@]}" known-hosts="$tmpdir/wrong_known_hosts"

# A known hosts file that does not know the host.
echo "[127.0.0.1]:1 $(cat "$tmpdir/other_key.pub")" > "$tmpdir/other_hosts"
expect_one_line "unknown host" "not in the known hosts file" \
  "${common[@]}" known-hosts="$tmpdir/other_hosts"

# verify-remote-host=false connects all the same.
t "$NBDKIT" -U - ssh "${common[@]}" known-hosts="$tmpdir/wrong_known_hosts" \
  verify-remote-host=false --run 'nbdinfo --size "$uri"' > "$tmpdir/size" ||
  fail "verify-remote-host=false did not connect"
[ "$(cat "$tmpdir/size")" = 65536 ] || fail "size: $(cat "$tmpdir/size")"

# A key the server does not know (and no password).
expect_one_line "wrong identity" "refused the login of root" \
  host=127.0.0.1 port="$sshd_port" user=root config= \
  known-hosts="$sshd_known_hosts" identity="$tmpdir/other_key" "$disk"

# A missing file, a directory.
expect_one_line "missing file" "No such file" \
  "${sshd_args[@]}" "$tmpdir/missing"
expect_one_line "directory" "is a directory" "${sshd_args[@]}" "$tmpdir"

# Nothing listens there.
port="$(free_port)"
expect_one_line "refused connection" "could not connect to 127.0.0.1 port $port" \
  host=127.0.0.1 port="$port" user=root config= "$disk"
