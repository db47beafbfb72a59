#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What the curl plugin sends reaches the web server: nginx logs each
# request's X-Test, Cookie and User-Agent headers (tests/nginx-start.sh),
# and the test reads them back.  header= (twice, and "Name:" removing a
# header), user-agent=, cookie= (inline, +FILE, - from stdin),
# header-script= with header-script-renew= (a new $iteration reaches
# the server once the period has passed, not before), cookie-script=
# with $url, and cookiejar= / cookiefile= (a cookie nginx sets is sent
# back, and written to the jar at exit), and -D curl.verbose=1.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh nbdinfo

mkdir -p "$tmpdir/www/setcookie"
head -c 1048576 /dev/urandom > "$tmpdir/www/disk.img"
cp "$tmpdir/www/disk.img" "$tmpdir/www/setcookie/"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    location /setcookie/ { add_header Set-Cookie 'srv=from-nginx; Path=/'; }"
url="http://127.0.0.1:$port/disk.img"
log="$tmpdir/nginx/access.log"

# run ARGS...: serve with ARGS and read 4 KiB at 64 KiB.
run ()
{
  : > "$log"
  t "$NBDKIT" -U - curl "$@" \
    --run 'nbdsh -u "$uri" -c "h.pread(4096, 65536)"' ||
    fail "curl $*: failed"
}
# expect PATTERN: every request logged matches PATTERN (there is one).
expect ()
{
  grep -q . "$log" || fail "nothing logged"
  if grep -v -- "$1" "$log"; then fail "a request without $1"; fi
}

run "$url" header='X-Test: hello there' header='User-Agent:'
expect 'x_test="hello there" ua="-"'
run "$url" user-agent='nbdkit-test/1.0'
expect 'ua="nbdkit-test/1.0"'
run "$url"
expect 'cookie="-" x_test="-" ua="-"'
run "$url" cookie='a=1; b=two'
expect 'cookie="a=1; b=two"'
printf 'c=from-file\n' > "$tmpdir/cookie"
run "$url" cookie=+"$tmpdir/cookie"
expect 'cookie="c=from-file"'
: > "$log"
printf 'd=from-stdin\n' |
  t "$NBDKIT" -U - curl "$url" cookie=- --run 'nbdinfo --size "$uri"' \
    > /dev/null || fail "cookie=- failed"
expect 'cookie="d=from-stdin"'

# cookie-script sees $url and $iteration.
run "$url" cookie-script='echo "u=${url##*/}; it=$iteration"'
expect 'cookie="u=disk.img; it=0"'

# header-script and cookie-script with renew=3: the HEAD at start-up
# and a read at once carry iteration 0; a read 3.3 s later carries
# iteration 1, and so does the next.  -D curl.scripts=1 shows the
# scripts' output.
: > "$log"
t "$NBDKIT" -v -D curl.scripts=1 -U - curl "$url" connections=2 \
  header-script='echo "X-Test: iter-$iteration"; echo "User-Agent: script"' \
  header-script-renew=3 \
  cookie-script='echo "c=$iteration"' cookie-script-renew=3 \
  --run 'nbdsh -u "$uri" -c "
import time
h.pread(512, 0)
time.sleep(3.3)
h.pread(512, 4096)
h.pread(512, 8192)
"' 2> "$tmpdir/scripts.err" || fail "header-script failed"
cat "$log"
grep -q 'debug: header-script: X-Test: iter-1$' "$tmpdir/scripts.err" ||
  fail "-D curl.scripts=1 did not show the script's output"
[ "$(sed -n 1p "$log" | grep -c '^HEAD .*cookie="c=0" x_test="iter-0" ua="script"')" = 1 ] ||
  fail "the first request did not carry iteration 0"
[ "$(sed -n 2p "$log" | grep -c 'cookie="c=0" x_test="iter-0"')" = 1 ] ||
  fail "the script was rerun before its renew period"
[ "$(sed -n 3p "$log" | grep -c 'cookie="c=1" x_test="iter-1"')" = 1 ] ||
  fail "the script was not rerun after its renew period"
[ "$(sed -n 4p "$log" | grep -c 'cookie="c=1" x_test="iter-1"')" = 1 ] ||
  fail "the script was rerun too soon"

# Cookies nginx sets: sent back with cookiefile=, saved with cookiejar=.
surl="http://127.0.0.1:$port/setcookie/disk.img"
run "$surl"
expect 'cookie="-"'
run "$surl" cookiefile=
tail -n +2 "$log" | grep -q 'cookie="srv=from-nginx"' ||
  { cat "$log"; fail "cookiefile=: the server's cookie was not sent back"; }
run "$surl" cookiejar="$tmpdir/jar"
grep -q 'srv.*from-nginx' "$tmpdir/jar" ||
  { cat "$tmpdir/jar"; fail "cookiejar=: the jar lacks the cookie"; }
run "$surl" cookiefile="$tmpdir/jar"
grep -q '^HEAD .*cookie="srv=from-nginx"' "$log" ||
  { cat "$log"; fail "cookiefile=FILE: the saved cookie was not sent"; }

# -D curl.verbose=1: libcurl's trace, request headers included, is in
# the server's debug output; without it, none is.  A transfer of the
# asynchronous path runs on the plugin's event loop, a thread of its
# own: its lines still carry the plugin's name (the server finds the
# layer from the caller's address), without a connection number.
t "$NBDKIT" -v -D curl.verbose=1 -U - curl "$url" header='X-Test: traced' \
  --run 'nbdsh -u "$uri" -c "h.pread(512, 1024)"' 2> "$tmpdir/verbose" ||
  fail "-D curl.verbose=1 failed"
grep -Eq 'curl(\[[0-9]+\])?: debug: curl > GET /disk.img' "$tmpdir/verbose" ||
  fail "-D curl.verbose=1: no request line in the debug output"
grep -Eq 'debug: curl > Range: bytes=1024-1535$' "$tmpdir/verbose" ||
  fail "-D curl.verbose=1: no Range header in the debug output"
grep -Eq 'debug: curl > X-Test: traced$' "$tmpdir/verbose" ||
  fail "-D curl.verbose=1: no X-Test header in the debug output"
t "$NBDKIT" -v -U - curl "$url" --run 'nbdinfo --size "$uri"' \
  2> "$tmpdir/quiet" > /dev/null || fail "-v failed"
if grep -q 'curl > ' "$tmpdir/quiet"; then
  fail "libcurl's trace without -D curl.verbose=1"
fi
