#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -u USER and -g GROUP: the server binds its socket and reads its TLS
# key as root, then serves as USER/GROUP with no other groups; the pid
# file is written where only root may write.  Names and numbers both
# work; an unknown user is a start-up error.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd nbdsh psktool
requires getent passwd nobody
requires getent group nogroup
nobody_uid="$(id -u nobody)"
nogroup_gid="$(getent group nogroup | cut -d: -f3)"

# A key only root can read: it must be loaded before root is given up.
psktool -u alice -p "$tmpdir/keys.psk" >/dev/null
chmod 600 "$tmpdir/keys.psk"
chmod 700 "$tmpdir"

check_ids ()                    # check_ids UID GID
{
  local st="/proc/$server_pid/status"
  awk '/^Uid:/ { print $2, $3, $4, $5 }' "$st"
  awk '/^Uid:/ { exit !($2 == u && $3 == u && $4 == u && $5 == u) }' \
    u="$1" "$st" || fail "server uids are not all $1: $(grep ^Uid: "$st")"
  awk '/^Gid:/ { exit !($2 == g && $3 == g && $4 == g && $5 == g) }' \
    g="$2" "$st" || fail "server gids are not all $2: $(grep ^Gid: "$st")"
  grep -Eq "^Groups:[[:space:]]*($2)?[[:space:]]*\$" "$st" ||
    fail "server kept other groups: $(grep ^Groups: "$st")"
}

start_server -u nobody -g nogroup --tls=require --tls-psk="$tmpdir/keys.psk" \
  memory 1M
check_ids "$nobody_uid" "$nogroup_gid"
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/keys.psk')
h.pwrite(b'written as nobody', 0)
assert h.pread(17, 0) == b'written as nobody'
"
stop_server

# Numbers, and -u alone takes the user's own group.
start_server -u "$nobody_uid" memory 1M
check_ids "$nobody_uid" "$(id -g nobody)"
t nbdsh -u "nbd+unix:///?socket=$sock" -c 'assert h.get_size() == 1048576'
stop_server

if "$NBDKIT" -f -U "$tmpdir/s2" -u no-such-user-here memory 1M \
     2>"$tmpdir/err"; then
  fail "an unknown user was accepted"
fi
cat "$tmpdir/err"
grep -q 'no such user' "$tmpdir/err" || fail "no message for an unknown user"
