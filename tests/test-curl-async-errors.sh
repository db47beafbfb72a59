#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# HTTP errors on the curl plugin's asynchronous path reach the client
# as the synchronous path (-D nbdkit.async=0) and Debian's nbdkit give
# them: nginx answers HEAD (so the server starts) but every GET of the
# file with 404, 416 or 500.  Eight reads in flight together each fail
# with EIO, the log names the status, and the connection goes on: a
# read after them fails the same way.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit
have_debian=
if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  have_debian=1
fi

mkdir -p "$tmpdir/www"
for code in 404 416 500; do
  head -c 1048576 /dev/urandom > "$tmpdir/www/e$code.img"
done
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    location = /e404.img { if (\$request_method = GET) { return 404; } }
    location = /e416.img { if (\$request_method = GET) { return 416; } }
    location = /e500.img { if (\$request_method = GET) { return 500; } }"

check_errors='
import nbd
bufs = [nbd.Buffer(4096) for i in range(8)]
cookies = [h.aio_pread(b, 65536 * i + 8192) for i, b in enumerate(bufs)]
failed = 0
for c in cookies:
    while True:
        try:
            if h.aio_command_completed(c):
                break
        except nbd.Error as e:
            assert e.errno == "EIO", e.errno
            failed += 1
            break
        h.poll(-1)
assert failed == 8, failed
try:
    h.pread(512, 0)
    raise AssertionError("a read of a failing URL succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
'
export check_errors
for code in 404 416 500; do
  url="http://127.0.0.1:$port/e$code.img"
  for side in async sync debian; do
    case $side in
      async) cmd=("$NBDKIT") ;;
      sync) cmd=("$NBDKIT" -D nbdkit.async=0) ;;
      debian) [ -n "$have_debian" ] || continue; cmd=("$debian_nbdkit") ;;
    esac
    t "${cmd[@]}" -U - curl "$url" \
      --run 'nbdsh -u "$uri" -c "$check_errors"' 2> "$tmpdir/err" ||
      { cat "$tmpdir/err"; fail "$side, HTTP $code: not EIO"; }
    if [ "$side" != debian ]; then
      grep -q "read at offset 8192: HTTP status $code" "$tmpdir/err" ||
        { cat "$tmpdir/err"; fail "$side, HTTP $code: no log line"; }
    fi
  done
done
