#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -D curl.times=1: when the plugin is unloaded, the debug log has one
# header line with the number of transfers and one line per stage
# (name resolution, connection, SSL negotiation, pretransfer, first
# byte received, data transfer, redirection time) with the seconds
# spent in it, summed over every transfer.  The count is the size
# request plus one per range request, on the synchronous path (-D
# nbdkit.async=0) as on the asynchronous one.  A slow nginx (limit_rate) makes
# "data transfer" at least the time the reads must take.  Without the
# flag nothing is printed.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd nbdsh

mkdir -p "$tmpdir/www/slow"
head -c 1048576 /dev/urandom > "$tmpdir/www/disk.img"
cp "$tmpdir/www/disk.img" "$tmpdir/www/slow/"
port="$(free_port)"
# 128 KiB/s after the first 64 KiB of each reply.
start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;
    location /slow/ { limit_rate 128k; limit_rate_after 64k; }"

stages='name resolution|connection|SSL negotiation|pretransfer|first byte received|data transfer|redirection time'

# Five reads of 4 KiB.
reads='
for i in range(5):
    h.pread(4096, i * 65536)
'
for filter in "" "-D nbdkit.async=0"; do
  t "$NBDKIT" -U - -v -D curl.times=1 $filter curl \
    "http://localhost:$port/disk.img" --run "nbdsh -u \"\$uri\" -c '$reads'" \
    2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "curl failed ($filter)"; }
  grep -E "curl: debug: times \(-D curl.times=1\), summed over 6 transfers" \
    "$tmpdir/err" || { cat "$tmpdir/err"; fail "no times header, 6 transfers ($filter)"; }
  [ "$(grep -Ec "curl: debug: ($stages) *: +[0-9]+\.[0-9]{6} s$" \
        "$tmpdir/err")" -eq 7 ] ||
    { grep times -A8 "$tmpdir/err"; fail "not 7 stage lines ($filter)"; }
done

# The slow reads: 2 x 256 KiB at 128 KiB/s after 64 KiB take about 3 s
# of data transfer between them.
t "$NBDKIT" -U - -v -D curl.times=1 curl "http://localhost:$port/slow/disk.img" \
  --run 'nbdsh -u "$uri" -c "h.pread(262144, 0); h.pread(262144, 262144)"' \
  2> "$tmpdir/err" || { cat "$tmpdir/err"; fail "slow reads failed"; }
grep -E 'curl: debug: (data transfer|name resolution)' "$tmpdir/err"
secs="$(sed -nE 's/.*curl: debug: data transfer *: +([0-9]+)\.[0-9]+ s$/\1/p' \
        "$tmpdir/err")"
[ -n "$secs" ] && [ "$secs" -ge 1 ] ||
  fail "data transfer time $secs s, expected at least 1 s"

# Without the flag: no times.
t "$NBDKIT" -U - -v curl "http://localhost:$port/disk.img" \
  --run 'nbdinfo --size "$uri"' > /dev/null 2> "$tmpdir/err" ||
  fail "curl failed without the flag"
if grep -E "curl.times|($stages) *:" "$tmpdir/err"; then
  fail "times printed without -D curl.times=1"
fi
