#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A web server that refuses HEAD (405), or answers it without a
# Content-Length, still gives the curl plugin the size: it asks again
# with a GET and reads only the headers (nbdkit 1.36's fallback), then
# serves the right bytes.  The GET for the size is the only request for
# the whole file (tests/curl-range-server.py logs each GET's range), and
# the server says in its debug log why it asked twice.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

img="$tmpdir/disk.img"
head -c 3000000 /dev/urandom > "$img"
for mode in 405 nolength; do
  rm -f "$tmpdir/port"
  HEAD=$mode timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-range-server.py" \
    "$img" "$tmpdir/port" 2> "$tmpdir/http.log" 9>&- &
  http=$!
  cleanup_fn _kill_pid $http
  wait_for 10 -s "$tmpdir/port" || fail "the range server did not start"
  url="http://127.0.0.1:$(cat "$tmpdir/port")/disk.img"

  start_server -v curl "$url" 2> "$tmpdir/server.log"
  t nbdsh -u "$uri" -c "
want = open('$img', 'rb').read()
assert h.get_size() == 3000000, h.get_size()
assert h.pread(4096, 8192) == want[8192:8192 + 4096]
assert h.pread(1000, 2999000) == want[2999000:]
" || fail "HEAD $mode: wrong size or bytes"
  stop_server
  kill $http
  cat "$tmpdir/http.log"
  grep -q "curl: $url: HEAD answered .*asking with GET" "$tmpdir/server.log" ||
    fail "HEAD $mode: no debug line for the fallback"
  [ "$(grep -c '^GET whole' "$tmpdir/http.log")" -eq 1 ] ||
    fail "HEAD $mode: not one GET of the whole file"
  grep -q '^GET bytes=8192-12287' "$tmpdir/http.log" ||
    fail "HEAD $mode: reads are not ranged GETs"
done
