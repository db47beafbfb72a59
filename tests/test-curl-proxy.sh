#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# proxy=, proxy-user=, proxy-password=: the curl plugin goes through a
# forward proxy (a second nginx server that passes each request on to
# the first).  The proxy logs every request with the credentials
# libcurl sent it (Proxy-Authorization), the origin still sees Range
# requests, and the bytes are the file's.  Without proxy= the proxy
# sees nothing.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdcopy cmp base64

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 1024 * 1024 + 5 )) /dev/urandom > "$img"
port="$(free_port)" pport="$(free_port)"
plog="$tmpdir/nginx/proxy.log"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;" \
  "server { listen 127.0.0.1:$pport;
    access_log $plog curltest;
    location / { proxy_pass http://127.0.0.1:$port; } }"
url="http://127.0.0.1:$port/disk.img"
printf 'proxy pw\n' > "$tmpdir/ppw"
export tmpdir

t "$NBDKIT" -U - curl "$url" proxy="http://127.0.0.1:$pport" \
  proxy-user=bob proxy-password=+"$tmpdir/ppw" \
  --run 'nbdcopy "$uri" "$tmpdir/ours"' || fail "proxy= failed"
cmp "$img" "$tmpdir/ours" || fail "the bytes differ"
cat "$plog"
auth="Basic $(printf 'bob:proxy pw' | base64)"
grep -q "^GET /disk.img status=206 range=\"bytes=.*pauth=\"$auth\"" "$plog" ||
  fail "the proxy did not see ranged GETs with bob's credentials"
grep -q 'GET /disk.img status=206' "$tmpdir/nginx/access.log" ||
  fail "the origin saw no range request"

: > "$plog"
t "$NBDKIT" -U - curl "$url" --run 'nbdcopy "$uri" "$tmpdir/direct"' ||
  fail "without proxy= failed"
[ ! -s "$plog" ] || fail "the proxy was used without proxy="
