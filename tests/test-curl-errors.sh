#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin's start-up errors: each is one line naming the
# plugin and the problem, and exit status 1, before the server
# listens.  A web server without byte ranges (nginx with max_ranges 0
# sends no Accept-Ranges), a missing file (404), a refused connection,
# a redirect with followlocation=false, an http URL with
# protocols=https, a script that fails or floods, and bad parameters.
# Then a server that claims ranges but ignores them (Accept-Ranges
# added by hand, max_ranges 0): reads fail with EIO, not wrong data,
# and the server stays up.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh

mkdir -p "$tmpdir/www/norange" "$tmpdir/www/liar"
head -c 1048576 /dev/urandom > "$tmpdir/www/disk.img"
cp "$tmpdir/www/disk.img" "$tmpdir/www/norange/"
cp "$tmpdir/www/disk.img" "$tmpdir/www/liar/"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    location /norange/ { max_ranges 0; }
    location /liar/ { max_ranges 0; add_header Accept-Ranges bytes; }
    location = /moved.img { return 301 /disk.img; }"
base="http://127.0.0.1:$port"

# start_fails REGEX ARGS...: the server refuses to start with exactly
# one error line, matching REGEX, and exit status 1.
start_fails ()
{
  local re="$1" status=0
  shift
  t "$NBDKIT" -U - curl "$@" --run 'exit 0' 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "curl $*: exit status $status, expected 1"
  [ "$(grep -c 'error' "$tmpdir/err")" -eq 1 ] ||
    fail "curl $*: not exactly one error line"
  grep -Eq "^nbdkit: curl: error: .*($re)" "$tmpdir/err" ||
    fail "curl $*: the error does not match '$re'"
}

start_fails 'does not support byte range' "$base/norange/disk.img"
start_fails 'HTTP status 404' "$base/missing.img"
start_fails 'HTTP status 301: a redirect' "$base/moved.img" \
  followlocation=false
start_fails '[Pp]rotocol.*http.*disabled' "$base/disk.img" protocols=https
start_fails 'protocols:.*nosuch' "$base/disk.img" protocols=https,nosuch
closed="$(free_port)"
start_fails "127.0.0.1.*$closed.*[Cc]onnect|[Cc]ouldn.t connect" \
  "http://127.0.0.1:$closed/disk.img"
start_fails 'url parameter is required' connections=2
start_fails "unknown parameter 'nosuch'" "$base/disk.img" nosuch=1
start_fails 'ssl-version: unknown' "$base/disk.img" ssl-version=tlsv9
start_fails 'connections: must be' "$base/disk.img" connections=0
start_fails 'header-script and header' "$base/disk.img" \
  header='X-Test: a' header-script='echo X-Test: b'
start_fails 'cookie-script and cookie' "$base/disk.img" \
  cookie='a=b' cookie-script='echo a=c'
start_fails 'header-script: failed with exit status 3' "$base/disk.img" \
  header-script='exit 3'
start_fails 'cookie-script: more than 1048576 bytes' "$base/disk.img" \
  cookie-script='head -c 3000000 /dev/zero 2>/dev/null | tr "\\0" a 2>/dev/null'
start_fails 'tcp-keepalive' "$base/disk.img" tcp-keepalive=maybe
start_fails 'timeout: must be 0 or more' "$base/disk.img" timeout=-1

# The redirect is followed by default.
t "$NBDKIT" -U - curl "$base/moved.img" --run 'nbdinfo --size "$uri"' \
  > "$tmpdir/size" || fail "the redirect was not followed"
[ "$(cat "$tmpdir/size")" -eq 1048576 ] || fail "wrong size after redirect"

# A server that says it serves ranges but sends the whole file: the
# reads fail (EIO), the server stays up, a second client is served.
start_server curl "$base/liar/disk.img"
t nbdsh -u "$uri" -c '
try:
    h.pread(4096, 8192)
    raise Exception("a read from a server ignoring Range succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
try:
    h.pread(4096, 0)
    raise Exception("an overlong reply was accepted")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
' || fail "reads from a server ignoring Range did not fail with EIO"
kill -0 "$server_pid" || fail "the server died"
t nbdinfo --size "$uri" > /dev/null || fail "the server no longer answers"
