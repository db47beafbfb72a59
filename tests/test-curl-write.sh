#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Writes through the curl plugin are PUT requests with Content-Range
# (nbdkit 1.32's page: the plugin supports writes).  Against a server
# that takes them (tests/curl-range-server.py, which refuses a wrong
# Content-Range) the bytes land in the file at the right offset and read
# back; nginx refuses PUT (405): the write fails with EIO and the
# server stays up and still reads; a file:// URL is a read-only export
# (libcurl cannot write a file at an offset).
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh nbdinfo cmp

img="$tmpdir/disk.img"
head -c 1048576 /dev/urandom > "$img"
cp "$img" "$tmpdir/expected"
timeout -k 5 120 /usr/bin/python3 "$srcdir/curl-range-server.py" \
  "$img" "$tmpdir/port" 2> "$tmpdir/server.log" 9>&- &
cleanup_fn _kill_pid $!
wait_for 10 -s "$tmpdir/port" || fail "the range server did not start"
url="http://127.0.0.1:$(cat "$tmpdir/port")/disk.img"

start_server curl "$url"
t nbdinfo "$uri" | grep -q 'is_read_only: false' ||
  fail "an http export is read-only"
t nbdsh -u "$uri" -c '
h.pwrite(b"A" * 5000, 1001)
h.pwrite(b"B" * 65536, 1048576 - 65536)
assert h.pread(5000, 1001) == b"A" * 5000
assert h.pread(65536, 1048576 - 65536) == b"B" * 65536
' || fail "writes did not read back"
stop_server
/usr/bin/python3 -c '
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
d[1001:6001] = b"A" * 5000
d[-65536:] = b"B" * 65536
open(p, "wb").write(d)' "$tmpdir/expected"
cmp "$img" "$tmpdir/expected" || fail "the file on the server is wrong"
grep -q '"PUT /disk.img HTTP/1.1" 204' "$tmpdir/server.log" ||
  fail "no PUT reached the server"

# nginx refuses PUT: EIO, and the server goes on serving reads.
mkdir -p "$tmpdir/www"
cp "$tmpdir/expected" "$tmpdir/www/disk.img"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;"
start_server curl "http://127.0.0.1:$port/disk.img"
t nbdsh -u "$uri" -c '
try:
    h.pwrite(b"C" * 4096, 0)
    raise Exception("a PUT to nginx succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
assert h.pread(5000, 1001) == b"A" * 5000
' || fail "a refused write did not fail cleanly"
grep -q 'PUT /disk.img status=405' "$tmpdir/nginx/access.log" ||
  fail "nginx saw no PUT"
cmp "$tmpdir/www/disk.img" "$tmpdir/expected" || fail "nginx's file changed"
stop_server

t "$NBDKIT" -U - curl "file://$img" --run 'nbdinfo "$uri"' |
  grep -q 'is_read_only: true' || fail "a file:// export is writable"
