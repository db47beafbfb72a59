#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --metrics=unix:PATH: the counters a scraper reads match what the
# clients did, exactly (requests, bytes, errors by errno, histogram
# counts, connections, handshake failures by reason, an open
# connection's own line, a label that needs escaping); promtool accepts
# the Prometheus text format, Prometheus' Accept header gets
# OpenMetrics; and hostile scrapers (a 1 MB request, a silent client,
# garbage, a burst of scrapes) neither stop the endpoint nor the NBD
# clients.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh curl promtool

metrics="$tmpdir/metrics"
start_server --metrics=unix:"$metrics" memory 1M
scrape () { t curl -sS --max-time 5 --unix-socket "$metrics" "$@" \
              http://localhost/metrics; }

# Export "": 5 reads of 4096, 3 writes of 512, 1 flush, and 1 read past
# the end (sent: strict mode off), which the server refuses with EINVAL.
# Meanwhile the open connection is listed with its own counts.
METRICS="$metrics" t nbdsh -u "$uri" -c '
import os, subprocess
for i in range(5):
    h.pread(4096, i * 4096)
for i in range(3):
    h.pwrite(b"w" * 512, i * 512)
h.flush()
h.set_strict_mode(0)
try:
    h.pread(4096, 1048576)
    raise Exception("read past the end succeeded")
except nbd.Error as e:
    assert e.errno == "EINVAL", e.errno
page = subprocess.run(["curl", "-sS", "--unix-socket", os.environ["METRICS"],
                       "http://localhost/metrics"], check=True,
                      capture_output=True, text=True).stdout
want = "nbdkit_connection_requests_total{id=\"1\",export=\"\",peer=\"unix\"} 10"
assert want in page.splitlines(), page
assert "nbdkit_connections 1" in page.splitlines(), page
'
# Another export, whose name needs escaping, with one zero.
t nbdsh -u "nbd+unix:///a%22b%5Cc?socket=$sock" -c 'h.zero(4096, 0)'
# A client that breaks the handshake.
t /usr/bin/python3 - "$sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.recv(18)
s.sendall(b"\0\0\0\3" + b"NOTMAGIC" + b"\0" * 8)
assert s.recv(100) == b""
PY

page="$tmpdir/page"
scrape -D "$tmpdir/headers" > "$page" || fail "scrape failed"
cat "$page"
has () { grep -Fxq -- "$1" "$page" || fail "no line: $1"; }
has 'nbdkit_requests_total{export="",command="read"} 6'
has 'nbdkit_requests_total{export="",command="write"} 3'
has 'nbdkit_requests_total{export="",command="flush"} 1'
has 'nbdkit_requests_total{export="",command="zero"} 0'
has 'nbdkit_request_bytes_total{export="",command="read"} 20480'
has 'nbdkit_request_bytes_total{export="",command="write"} 1536'
has 'nbdkit_request_errors_total{export="",command="read",errno="EINVAL"} 1'
has 'nbdkit_request_duration_seconds_count{export="",command="read"} 6'
has 'nbdkit_request_duration_seconds_bucket{export="",command="read",le="+Inf"} 6'
has 'nbdkit_request_duration_seconds_count{export="",command="write"} 3'
has 'nbdkit_requests_total{export="a\"b\\c",command="zero"} 1'
has 'nbdkit_connections_opened_total 3'
has 'nbdkit_connections_closed_total 3'
has 'nbdkit_connections 0'
has 'nbdkit_requests_in_flight 0'
has 'nbdkit_handshakes_total 3'
has 'nbdkit_handshake_failures_total{reason="bad option magic"} 1'
has 'nbdkit_build_info{version="1.46.2"} 1'
# Only the one error, and no connection is listed once closed.
[ "$(grep -c '^nbdkit_request_errors_total' "$page")" -eq 1 ] ||
  fail "unexpected errors"
! grep -q '^nbdkit_connection_requests_total' "$page" ||
  fail "a closed connection is listed"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmpdir/headers" ||
  fail "not the Prometheus text format: $(cat "$tmpdir/headers")"
t promtool check metrics < "$page" || fail "promtool rejects the page"

# What Prometheus asks for gets OpenMetrics, with UNIT lines and # EOF.
scrape -D "$tmpdir/headers" -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' \
       > "$tmpdir/om"
grep -qi '^content-type: application/openmetrics-text; version=1.0.0; charset=utf-8' \
     "$tmpdir/headers" || fail "no OpenMetrics: $(cat "$tmpdir/headers")"
[ "$(tail -n1 "$tmpdir/om")" = "# EOF" ] || fail "OpenMetrics without # EOF"
grep -Fxq '# UNIT nbdkit_request_duration_seconds seconds' "$tmpdir/om" ||
  fail "no UNIT line"
grep -Fxq '# TYPE nbdkit_requests counter' "$tmpdir/om" ||
  fail "OpenMetrics counter family named with _total"

# Other paths and methods.
code=$(t curl -s -o /dev/null -w '%{http_code}' --unix-socket "$metrics" \
       http://localhost/other)
[ "$code" = 404 ] || fail "/other gave $code"

# Hostile scrapers, while an NBD client keeps reading.
t /usr/bin/python3 - "$metrics" "$sock" <<'PY'
import socket, sys, time, nbd
path, sock = sys.argv[1:]
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(10)
    return s
def reply(s):
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            return data
        data += b
h = nbd.NBD()
h.connect_unix(sock)
# A 1 MB request line: refused after 8 KiB, the connection closed.
s = conn()
try:
    s.sendall(b"GET /" + b"a" * 1048576 + b" HTTP/1.1\r\n\r\n")
    r = reply(s)
    assert r == b"" or r.startswith(b"HTTP/1.1 431"), r[:100]
except (BrokenPipeError, ConnectionResetError):
    pass
# Garbage (binary, no request line) gets 400 or 431.
s = conn()
s.sendall(b"\x00\xff\x16\x03\x01garbage\r\n\r\n")
r = reply(s)
assert r.startswith(b"HTTP/1.1 4"), r[:100]
s = conn()
s.sendall(b"BREW /metrics HTCPCP/1.0\r\n\r\n")
assert reply(s).startswith(b"HTTP/1.1 400"), "bad version"
# A silent client is dropped within the 3 s limit; NBD is served
# meanwhile.
s = conn()
t0 = time.monotonic()
n = 0
while time.monotonic() - t0 < 1:
    h.pread(4096, 0)
    n += 1
assert n > 10, n
assert reply(s) == b""
assert time.monotonic() - t0 < 6, time.monotonic() - t0
# A burst of scrapes: each answered in full.
for i in range(200):
    s = conn()
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    r = reply(s)
    assert r.startswith(b"HTTP/1.1 200 OK") and b"nbdkit_build_info" in r, r[:200]
h.pread(4096, 0)
h.shutdown()
PY
[ $? -eq 0 ] || fail "hostile scrapers"
scrape > "$page" || fail "no scrape after the hostile ones"
grep -q '^nbdkit_connections_opened_total 4$' "$page" ||
  fail "the NBD client during the hostile scrapes was not counted"
kill -0 "$server_pid" || fail "server died"

# TLS sessions, by GnuTLS' version and cipher names.
if command -v psktool > /dev/null; then
  psktool -u alice -p "$tmpdir/keys.psk" > /dev/null
  t "$NBDKIT" -U - --tls=require --tls-psk="$tmpdir/keys.psk" \
    --metrics=unix:"$tmpdir/m2" memory 1M \
    --run "nbdinfo \"\$uri\" > /dev/null &&
           curl -sS --unix-socket $tmpdir/m2 http://localhost/metrics" \
    > "$tmpdir/tls" || fail "TLS server or client failed"
  grep -Eq '^nbdkit_tls_sessions_total\{version="TLS1\.[23]",cipher="[A-Z0-9-]+"\} 1$' \
       "$tmpdir/tls" || fail "no TLS session: $(grep tls "$tmpdir/tls")"
fi

# A request in an asynchronous plugin is in flight until it completes,
# and counted when answered from the plugin's thread.
t "$NBDKIT" -U - --metrics=unix:"$tmpdir/m3" example-async size=1M delay=500 \
  --run "nbdsh -u \"\$uri\" -c '
import subprocess
def scrape():
    return subprocess.run([\"curl\", \"-sS\", \"--unix-socket\", \"$tmpdir/m3\",
                           \"http://localhost/metrics\"], check=True,
                          capture_output=True, text=True).stdout.splitlines()
c = h.aio_pread(nbd.Buffer(4096), 8192)
h.poll(0)
assert \"nbdkit_requests_in_flight 1\" in scrape()
while not h.aio_command_completed(c):
    h.poll(-1)
page = scrape()
assert \"nbdkit_requests_in_flight 0\" in page
assert \"nbdkit_requests_total{export=\\\"\\\",command=\\\"read\\\"} 1\" in page, page
'" || fail "in-flight or asynchronous requests miscounted"
