#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --metrics with plugins' and filters' own counters (nbdkit_metric_*):
# the figures on the page are exactly what the client caused, charged
# to the export of the connection that caused them (even when a
# plugin's own thread counts) or to "(none)" at start-up:
#   - cache (cache-on-read): read requests served from the cache alone
#     (hits) and those that went to the plugin (misses);
#   - retry and retry-request over a plugin that fails its first calls:
#     retries by command;
#   - curl against nginx: HTTP replies by status, the start-up HEAD (200)
#     outside any connection, ranged GETs (206) per export, and a read
#     past a file that shrank (416);
#   - S3 against the fake store: the start-up listing, ranged GETs, a
#     404 (zeroes) and a 500 retried twice (three replies).
# promtool accepts each page, and OpenMetrics names the families
# without _total.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh curl promtool
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

metrics="$tmpdir/metrics"
page="$tmpdir/page"
# scrape: the page (Prometheus text) into $page, checked by promtool.
scrape ()
{
  t curl -sS --max-time 5 --unix-socket "$metrics" \
    http://localhost/metrics > "$page" || fail "scrape failed"
  t promtool check metrics < "$page" ||
    { cat "$page"; fail "promtool rejects the page"; }
}
has () { grep -Fxq -- "$1" "$page" || { grep -v '^nbdkit_request' "$page"; fail "no line: $1"; }; }
# Exactly LINES samples of FAMILY (the others would be miscounts).
count_is ()
{
  local n
  n=$(grep -c "^$1{" "$page" || :)
  [ "$n" = "$2" ] || { grep "^$1" "$page"; fail "$1: $n samples, not $2"; }
}

# --- cache: blocks of 64K, cache-on-read -----------------------------------
start_server --metrics=unix:"$metrics" --filter=cache memory 1M \
  cache-on-read=true
t nbdsh -u "$uri" -c '
h.pread(4096, 0)           # miss: fills block 0
h.pread(4096, 0)           # hit
h.pread(4096, 4096)        # hit, same block
h.pread(4096, 65536)       # miss: fills block 1
h.pread(131072, 0)         # hit: blocks 0 and 1
h.pread(4096, 65536 * 3)   # miss
h.pread(65536 * 3, 0)      # miss: block 2 was never read
h.pread(1, 65536 * 2)      # hit
h.pread(4096, 65536 * 5)   # miss: fills block 5
h.pread(65536 * 3, 65536 * 4)  # one miss: blocks 4 and 6 around 5
'
scrape
has 'nbdkit_cache_hits_total{export=""} 4'
has 'nbdkit_cache_misses_total{export=""} 6'
has '# TYPE nbdkit_cache_hits_total counter'
t curl -sS --max-time 5 --unix-socket "$metrics" \
  -H 'Accept: application/openmetrics-text;version=1.0.0' \
  http://localhost/metrics > "$tmpdir/om" || fail "OpenMetrics scrape"
grep -Fxq '# TYPE nbdkit_cache_misses counter' "$tmpdir/om" ||
  fail "OpenMetrics: the cache family is not named without _total"
stop_server

# --- retry: two failed writes, retried 1 s apart -----------------------------
start_server --metrics=unix:"$metrics" --filter=retry "$flaky" fail=2 \
  retry-delay=1 retry-exponential=no
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0); h.pread(512, 0)'
scrape
has 'nbdkit_retry_retries_total{export="",command="pwrite"} 2'
count_is nbdkit_retry_retries_total 1
stop_server

# --- retry-request: one failed open, one failed read ------------------------
start_server --metrics=unix:"$metrics" --filter=retry-request "$flaky" \
  fail=1 fail-open=1 retry-request-delay=1
t nbdsh -u "nbd+unix:///e1?socket=$sock" -c 'h.pread(512, 0)'
scrape
has 'nbdkit_retry_request_retries_total{export="e1",command="open"} 1'
has 'nbdkit_retry_request_retries_total{export="e1",command="pread"} 1'
count_is nbdkit_retry_request_retries_total 2
stop_server

# --- curl against nginx -----------------------------------------------------
if command -v nginx > /dev/null || [ -x /usr/sbin/nginx ]; then
  source "$srcdir/nginx-start.sh"
  mkdir -p "$tmpdir/www"
  head -c 1048576 /dev/urandom > "$tmpdir/www/disk.img"
  port="$(free_port)"
  start_nginx "$tmpdir/nginx" "127.0.0.1:$port" "root $tmpdir/www;"
  start_server --metrics=unix:"$metrics" curl \
    "http://127.0.0.1:$port/disk.img"
  # Three reads on export "", one on "b"; then the file shrinks and a
  # read past its new end gets 416.
  t nbdsh -u "$uri" -c '
for i in range(3):
    h.pread(4096, i * 4096)
'
  t nbdsh -u "nbd+unix:///b?socket=$sock" -c 'h.pread(512, 0)'
  : > "$tmpdir/www/disk.img"
  t nbdsh -u "$uri" -c '
try:
    h.pread(4096, 8192)
    raise Exception("read of a truncated file succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
'
  scrape
  has 'nbdkit_curl_http_responses_total{export="(none)",status="200"} 1'
  has 'nbdkit_curl_http_responses_total{export="",status="206"} 3'
  has 'nbdkit_curl_http_responses_total{export="b",status="206"} 1'
  has 'nbdkit_curl_http_responses_total{export="",status="416"} 1'
  count_is nbdkit_curl_http_responses_total 4
  stop_server
else
  echo "$0: nginx not found: the curl part is skipped"
fi

# --- S3 against the fake store ----------------------------------------------
source "$srcdir/S3-helpers.sh"
s3_fake_start
export tmpdir
start_server --metrics=unix:"$metrics" "${fake_args[@]}"
t nbdsh -u "$uri" -c '
import os
fk = os.environ["tmpdir"] + "/fake/status"
h.pread(4096, 0)                        # 206
h.pread(8192, 65536 - 4096)             # two objects: 206 twice
open(fk, "w").write("404\n")
assert h.pread(4096, 0) == bytes(4096)  # NoSuchKey reads as zeroes
open(fk, "w").write("500\n")
try:
    h.pread(4096, 0)                    # 500, retried twice
    raise Exception("read succeeded through 500s")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
'
scrape
has 'nbdkit_s3_http_responses_total{export="(none)",status="200"} 1'
has 'nbdkit_s3_http_responses_total{export="",status="206"} 3'
has 'nbdkit_s3_http_responses_total{export="",status="404"} 1'
has 'nbdkit_s3_http_responses_total{export="",status="500"} 3'
count_is nbdkit_s3_http_responses_total 4
stop_server
echo "OK: the modules' counters match what the clients did"
