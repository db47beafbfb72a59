#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin's resolve= and ipresolve=.  A made-up host name
# (under .invalid, which DNS never answers) reaches nginx only through
# resolve=HOST:PORT:ADDRESS, and only the entry for the URL's host and
# port counts among several.  With the name mapped to both ::1 and
# 127.0.0.1, and one nginx on each family, ipresolve=v4 reaches only
# the IPv4 one and ipresolve=v6 only the IPv6 one (the other family's
# server is the one that logs the request; the server listening on the
# family ipresolve forbids makes start-up fail with a refused
# connection).  Bad values stop the server at start-up with one line.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh nbdcopy cmp

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c 1048576 /dev/urandom > "$img"
port4="$(free_port)"
start_nginx "$tmpdir/ngx4" "127.0.0.1:$port4" "root $tmpdir/www;"
# The IPv6 server: the same port number is free on ::1 as a rule, but
# ask for one of its own to be sure.
port6="$(free_port)"
start_nginx "$tmpdir/ngx6" "[::1]:$port6" "root $tmpdir/www;"
export tmpdir

name=disk.nbdkit-test.invalid

# resolve= sends the made-up name to 127.0.0.1; the other entries (a
# different port, a different host) do not get in the way.
t "$NBDKIT" -U - curl "http://$name:$port4/disk.img" \
  resolve="$name:1:127.0.0.9" resolve="$name:$port4:127.0.0.1" \
  resolve="other.invalid:$port4:127.0.0.9" \
  --run 'nbdcopy "$uri" "$tmpdir/out"' || fail "resolve= did not reach nginx"
cmp "$img" "$tmpdir/out" || fail "resolve=: bytes differ"
grep -q 'GET /disk.img status=206' "$tmpdir/ngx4/access.log" ||
  fail "no ranged GET in the IPv4 nginx's log"

# An address where nothing listens: the connection is refused there
# (so the name really went where resolve= said).
refuses "curl: error: .*(127\.0\.0\.9|[Cc]ouldn.t connect|[Ff]ailed to connect)" \
  curl "http://$name:$port4/disk.img" resolve="$name:$port4:127.0.0.9" ||
  fail "resolve= to a closed address did not fail"

# ipresolve= with a name that has both families.  Each server is asked
# through the other's family too, which must fail.
for fam in 4 6; do
  eval port=\$port$fam
  both="$name:$port:[::1],127.0.0.1"
  : > "$tmpdir/ngx4/access.log"; : > "$tmpdir/ngx6/access.log"
  t "$NBDKIT" -U - curl "http://$name:$port/disk.img" \
    resolve="$both" ipresolve=v$fam \
    --run 'nbdsh -u "$uri" -c "assert h.pread(512, 4096) == open(\"$tmpdir/www/disk.img\", \"rb\").read()[4096:4608]"' ||
    fail "ipresolve=v$fam did not reach the IPv$fam nginx"
  grep -q 'GET /disk.img status=206' "$tmpdir/ngx$fam/access.log" ||
    fail "ipresolve=v$fam: no GET in the IPv$fam nginx's log"
  other=$(( fam == 4 ? 6 : 4 ))
  refuses "curl: error: .*([Cc]ouldn.t connect|[Ff]ailed to connect)" \
    curl "http://$name:$port/disk.img" resolve="$both" ipresolve=v$other ||
    fail "ipresolve=v$other reached the IPv$fam-only nginx"
  # any: either family will do, so it works.
  t "$NBDKIT" -U - curl "http://$name:$port/disk.img" \
    resolve="$both" ipresolve=any --run 'nbdinfo --size "$uri"' \
    > "$tmpdir/size" || fail "ipresolve=any failed on IPv$fam"
  [ "$(cat "$tmpdir/size")" = 1048576 ] || fail "ipresolve=any: wrong size"
done

# Bad values.
url="http://127.0.0.1:$port4/disk.img"
refuses "ipresolve: 'v5' is not one of any, v4, v6" curl "$url" ipresolve=v5 ||
  fail "ipresolve=v5 accepted"
for bad in "$name" "$name:$port4" ":$port4:127.0.0.1" "$name::127.0.0.1" \
           "$name:$port4:" "$name:http:127.0.0.1" "$name:70000:127.0.0.1" \
           "$name:0:127.0.0.1"; do
  refuses "resolve: '.*' is not HOST:PORT:ADDRESS" curl "$url" resolve="$bad" ||
    fail "resolve=$bad accepted"
done
