#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nginx killed and restarted under a copy through the curl plugin.  With
# the retry filter the copy completes and the bytes are the file's
# (the pool's handles find their connections dead and reconnect).
# Without it the client gets an error, the server stays up, and once
# nginx is back a new client is served.  nginx is slowed (limit_rate)
# so that the copy is still running when it is killed.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdcopy nbdinfo cmp
[ -f "$abs_top_builddir/filters/retry/.libs/nbdkit-retry-filter.so" ] ||
  { echo "$0: SKIP: the retry filter is not built"; exit 77; }

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 10 * 1024 * 1024 )) /dev/urandom > "$img"
port="$(free_port)"
site="root $tmpdir/www; limit_rate 1m;"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "$site"
url="http://127.0.0.1:$port/disk.img"

# bounce: kill nginx 1.5 s from now, start it again 1 s later.
bounce ()
{
  sleep 1.5
  _kill_pid "$nginx_pid"
  wait "$nginx_pid" 2>/dev/null || :
  sleep 1
  start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "$site"
}

start_server --filter=retry curl "$url" retry-delay=1 timeout=20
t nbdcopy "$uri" "$tmpdir/copy" &
copy=$!
bounce
wait "$copy" || fail "the copy failed despite the retry filter"
cmp "$img" "$tmpdir/copy" || fail "the copy's bytes are wrong"
grep -q 'GET /disk.img status=206' "$tmpdir/nginx/access.log" ||
  fail "the restarted nginx served nothing"
stop_server

start_server curl "$url" timeout=20
t nbdcopy "$uri" "$tmpdir/copy2" 2> "$tmpdir/copy2.err" &
copy=$!
bounce
if wait "$copy"; then fail "the copy succeeded with nginx killed under it"; fi
cat "$tmpdir/copy2.err"
kill -0 "$server_pid" || fail "the server died"
t nbdcopy "$uri" "$tmpdir/copy3" || fail "a new client was not served"
cmp "$img" "$tmpdir/copy3" || fail "the new client's bytes are wrong"
