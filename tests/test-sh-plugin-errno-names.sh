#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The errno name a failing sh or eval script prints first on stderr,
# mapped as nbdkit 1.32 maps it: only the names nbdkit's sh plugin
# knows (EPERM EIO ENOMEM EINVAL ENOSPC EROFS ESHUTDOWN ENOTSUP
# EOPNOTSUPP EOVERFLOW EDQUOT EFBIG), in any case ("eperm" is EPERM),
# at the very start and followed by whitespace or nothing.  Anything
# else, real errno names the NBD protocol has no code for (EPIPE,
# ENOENT) included, is EIO.  The client's errno for each line is
# compared with Debian's nbdkit running the same script.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

cat > "$tmpdir/fail.sh" <<'SH'
#!/bin/sh
case "$1" in
  get_size) echo 1M ;;
  pread) printf '%s\n' "$MSG" >&2; exit 1 ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/fail.sh"
client='nbdsh -u "$uri" -c "
import errno
try:
    h.pread(512, 0)
    print(\"no error\")
except nbd.Error as e:
    print(errno.errorcode.get(e.errno, e.errno))
"'

# errno_of SERVER PLUGIN-ARGS...: the client's errno name for $MSG.
errno_of ()
{
  local server="$1"
  shift
  t "$server" -U - "$@" --run "$client" 2> "$tmpdir/err" ||
    { cat "$tmpdir/err"; fail "$server $*: failed with MSG=$MSG"; }
}

# MESSAGE:ERRNO, ERRNO as the client sees it (EROFS goes over NBD as
# EPERM; ENOTSUP, EOPNOTSUPP and EOVERFLOW as EINVAL; EDQUOT and EFBIG
# as ENOSPC).
cases=(
  "EPERM:EPERM" "eperm:EPERM" "Eperm denied:EPERM" "EIO boom:EIO"
  "ENOMEM:ENOMEM" "einval bad:EINVAL" "ENOSPC full:ENOSPC"
  "enospc full:ENOSPC" "EROFS:EPERM" "ESHUTDOWN bye:ESHUTDOWN"
  "ENOTSUP:EINVAL" "EOPNOTSUPP:EINVAL" "EOVERFLOW:EINVAL"
  "EDQUOT:ENOSPC" "EFBIG:ENOSPC"
  "EPIPE:EIO" "EPIPE broken:EIO" "ENOENT:EIO" "EACCES:EIO"
  "ETIMEDOUT:EIO" "EBADMSG:EIO" "EAGAIN:EIO" "EBADF bad handle:EIO"
  "EPERMX:EIO" "EPERM:x:EIO" "  EPERM blanks first:EIO"
  "just a message:EIO" ":EIO"
)
for c in "${cases[@]}"; do
  export MSG="${c%:*}" want="${c##*:}"
  got="$(errno_of "$NBDKIT" sh "$tmpdir/fail.sh")"
  [ "$got" = "$want" ] || fail "sh, stderr '$MSG': client got $got, not $want"
  got="$(errno_of "$NBDKIT" eval get_size='echo 1M' \
           pread='printf "%s\n" "$MSG" >&2; exit 1')"
  [ "$got" = "$want" ] ||
    fail "eval, stderr '$MSG': client got $got, not $want"
  if [ -x /usr/bin/nbdkit ]; then
    ref="$(errno_of /usr/bin/nbdkit sh "$tmpdir/fail.sh")"
    [ "$ref" = "$want" ] ||
      fail "Debian's nbdkit gives $ref for '$MSG', the test says $want"
  fi
  echo "'$MSG' -> $got"
done

# The log keeps the message after a known name, the whole text otherwise.
MSG="EPIPE broken" t "$NBDKIT" -U - sh "$tmpdir/fail.sh" --run "$client" \
  > /dev/null 2> "$tmpdir/err"
grep -q 'pread: EPIPE broken$' "$tmpdir/err" || fail "EPIPE: message lost"
MSG="eperm denied" t "$NBDKIT" -U - sh "$tmpdir/fail.sh" --run "$client" \
  > /dev/null 2> "$tmpdir/err"
grep -q 'pread: denied$' "$tmpdir/err" || fail "eperm: message lost"
