#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin reads a disk image that nginx serves over HTTP: the
# bytes nbdcopy gets are the file's, the size is the file's (not a
# multiple of 512), and Debian's nbdkit given the same command gets the
# same bytes and size.  Reads at odd offsets and lengths come back
# right (a wrong Range end, off by one, would show here), and so does a
# file:// URL.  nginx logs each request: reads must be GETs with a
# Range header, never a whole-file GET.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdcopy nbdinfo nbdsh cmp
# Debian's server (/usr/bin/nbdkit here; /usr/sbin on some systems).
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit

mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 3 * 1024 * 1024 + 1234 )) /dev/urandom > "$img"
port="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;"
url="http://127.0.0.1:$port/disk.img"
export tmpdir

t "$NBDKIT" -U - curl "$url" \
  --run 'nbdinfo --size "$uri" && nbdcopy "$uri" "$tmpdir/ours"' \
  > "$tmpdir/size.ours" || fail "our curl plugin failed"
cmp "$img" "$tmpdir/ours" || fail "our bytes differ from the file"
[ "$(cat "$tmpdir/size.ours")" = "$(stat -c %s "$img")" ] ||
  fail "size $(cat "$tmpdir/size.ours") is not the file's"

if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  t "$debian_nbdkit" -U - curl "$url" \
    --run 'nbdinfo --size "$uri" && nbdcopy "$uri" "$tmpdir/theirs"' \
    > "$tmpdir/size.theirs" || fail "Debian's nbdkit curl failed"
  cmp "$tmpdir/ours" "$tmpdir/theirs" || fail "bytes differ from Debian's"
  cmp "$tmpdir/size.ours" "$tmpdir/size.theirs" ||
    fail "size differs from Debian's"
else
  echo "$0: Debian's nbdkit curl plugin not installed, comparison skipped"
fi

# Odd offsets and lengths, including the last byte.
check_reads='
import os
data = open(os.environ["img"], "rb").read()
n = len(data)
for off, cnt in [(0, 1), (1, 511), (4095, 4097), (n - 1, 1), (n - 1000, 1000),
                 (1 << 20, 1 << 20), (12345, 777777)]:
    got = h.pread(cnt, off)
    assert got == data[off:off + cnt], (off, cnt)
'
export img check_reads
t "$NBDKIT" -U - curl url="$url" \
  --run 'nbdsh -u "$uri" -c "$check_reads"' || fail "odd reads differ"

grep -q 'GET /disk.img status=206 range="bytes=' "$tmpdir/nginx/access.log" ||
  { cat "$tmpdir/nginx/access.log"; fail "no ranged GET reached nginx"; }
if grep 'GET /disk.img' "$tmpdir/nginx/access.log" | grep -q 'range=""'; then
  cat "$tmpdir/nginx/access.log"
  fail "a GET without Range reached nginx"
fi

# file:// URLs.
t "$NBDKIT" -U - curl "file://$img" \
  --run 'nbdcopy "$uri" "$tmpdir/file"' || fail "file:// failed"
cmp "$img" "$tmpdir/file" || fail "file:// bytes differ"
