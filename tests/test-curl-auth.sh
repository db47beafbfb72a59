#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# HTTP basic authentication with the curl plugin, against nginx's
# auth_basic with an htpasswd file made by openssl passwd.  No
# credentials and a wrong password stop the server at start-up with one
# line; user= with password= inline, +FILE, - (standard input) and -FD,
# and the user in the URL, each read the file's bytes, and nginx logs
# the user.  Debian's nbdkit with password=+FILE gets the same bytes.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd openssl nbdcopy cmp
# Debian's server (/usr/bin/nbdkit here; /usr/sbin on some systems).
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 1024 * 1024 + 99 )) /dev/urandom > "$img"
printf 'alice:%s\n' "$(openssl passwd -apr1 's3cret pass')" \
  > "$tmpdir/htpasswd"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    auth_basic private; auth_basic_user_file $tmpdir/htpasswd;"
url="http://127.0.0.1:$port/disk.img"
log="$tmpdir/nginx/access.log"
printf 's3cret pass\n' > "$tmpdir/pw"
export tmpdir

start_fails ()
{
  local status=0
  t "$NBDKIT" -U - curl "$@" --run 'exit 0' 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "curl $*: exit status $status, expected 1"
  [ "$(grep -c error "$tmpdir/err")" -eq 1 ] ||
    fail "curl $*: not exactly one error line"
  grep -q '^nbdkit: curl: error: .*HTTP status 401: wrong or missing credentials' \
    "$tmpdir/err" || fail "curl $*: not the credentials error"
}
copy_ok ()
{
  local name="$1"
  shift
  : > "$log"
  t "$NBDKIT" -U - curl "$@" --run "nbdcopy \"\$uri\" $tmpdir/$name" ||
    fail "curl $*: failed"
  cmp "$img" "$tmpdir/$name" || fail "curl $*: the bytes differ"
  grep -q 'GET /disk.img status=206 .* user="alice"' "$log" ||
    { cat "$log"; fail "curl $*: nginx did not see alice"; }
}

start_fails "$url"
start_fails "$url" user=alice password=wrong
start_fails "$url" user=alice password=+/dev/null
copy_ok inline "$url" user=alice password='s3cret pass'
copy_ok file "$url" user=alice password=+"$tmpdir/pw"
copy_ok inurl "http://alice:s3cret%20pass@127.0.0.1:$port/disk.img"
: > "$log"
t "$NBDKIT" -U - curl "$url" user=alice password=- \
  --run 'nbdcopy "$uri" "$tmpdir/stdin"' < "$tmpdir/pw" ||
  fail "password=- failed"
cmp "$img" "$tmpdir/stdin" || fail "password=-: the bytes differ"
t "$NBDKIT" -U - curl "$url" user=alice password=-3 \
  --run 'nbdcopy "$uri" "$tmpdir/fd"' 3< "$tmpdir/pw" ||
  fail "password=-FD failed"
cmp "$img" "$tmpdir/fd" || fail "password=-FD: the bytes differ"

if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  t "$debian_nbdkit" -U - curl "$url" user=alice password=+"$tmpdir/pw" \
    --run 'nbdcopy "$uri" "$tmpdir/theirs"' || fail "Debian's failed"
  cmp "$tmpdir/file" "$tmpdir/theirs" || fail "bytes differ from Debian's"
fi
