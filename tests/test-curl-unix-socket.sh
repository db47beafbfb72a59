#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# unix-socket-path=: nginx listens only on a Unix socket; the curl
# plugin reaches it there (the URL's host is only the Host header) and
# reads the file's bytes, as Debian's nbdkit does with the same
# command.  Without the parameter the URL's host:port is tried and
# refused (nothing listens there), which shows the socket was used.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdcopy cmp
# Debian's server (/usr/bin/nbdkit here; /usr/sbin on some systems).
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 1024 * 1024 + 7 )) /dev/urandom > "$img"
sock="$tmpdir/nginx.sock"
start_nginx "$tmpdir/nginx" "unix:$sock" "root $tmpdir/www;"
closed="$(free_port)"
url="http://localhost:$closed/disk.img"
export tmpdir

t "$NBDKIT" -U - curl "$url" unix-socket-path="$sock" \
  --run 'nbdcopy "$uri" "$tmpdir/ours"' || fail "unix-socket-path= failed"
cmp "$img" "$tmpdir/ours" || fail "the bytes differ"
grep -q 'GET /disk.img status=206' "$tmpdir/nginx/access.log" ||
  fail "nginx saw no range request"
expect_fail t "$NBDKIT" -U - curl "$url" --run 'exit 0' 2>/dev/null ||
  fail "the URL's port answered: the test proves nothing"

if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  t "$debian_nbdkit" -U - curl "$url" unix-socket-path="$sock" \
    --run 'nbdcopy "$uri" "$tmpdir/theirs"' || fail "Debian's failed"
  cmp "$tmpdir/ours" "$tmpdir/theirs" || fail "bytes differ from Debian's"
fi
