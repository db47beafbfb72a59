#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --metrics=:PORT (127.0.0.1 by default) scraped by a real Prometheus,
# which asks for OpenMetrics: its query API gives the same figures the
# client caused, and the scrape reports no error.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh curl prometheus

mport="$(free_port)"
start_server --metrics=:"$mport" memory 1M
t nbdsh -u "$uri" -c '
for i in range(5):
    h.pread(4096, i * 4096)
for i in range(3):
    h.pwrite(b"w" * 512, i * 512)
h.flush()
h.set_strict_mode(0)
try:
    h.pread(4096, 1048576)
except nbd.Error as e:
    assert e.errno == "EINVAL", e.errno
'
# The endpoint is on 127.0.0.1, not elsewhere.
t curl -sS --max-time 5 "http://127.0.0.1:$mport/metrics" > "$tmpdir/page" ||
  fail "no endpoint on 127.0.0.1:$mport"
grep -Fxq 'nbdkit_requests_total{export="",command="read"} 6' "$tmpdir/page" ||
  fail "curl over TCP: wrong read count"

# A literal IPv6 address, where the machine has ::1; and the addresses
# and ports that are refused.
if /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
  p6="$(free_port)"
  t "$NBDKIT" -U - --metrics="[::1]:$p6" memory 1M \
    --run "curl -sS --max-time 5 http://[::1]:$p6/metrics" > "$tmpdir/v6" ||
    fail "--metrics=[::1]:$p6"
  grep -q '^nbdkit_build_info' "$tmpdir/v6" || fail "no page over ::1"
fi
for bad in :99999 :0 ::1 localhost:9199 unix: '[::1]'; do
  refuses 'metrics' --metrics="$bad" memory 1M || fail "--metrics=$bad"
done

pport="$(free_port)"
cat > "$tmpdir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: nbdkit
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
prometheus --config.file="$tmpdir/prometheus.yml" \
           --storage.tsdb.path="$tmpdir/tsdb" \
           --web.listen-address="127.0.0.1:$pport" \
           > "$tmpdir/prometheus.log" 2>&1 9>&- &
prom_pid=$!
cleanup_fn _kill_pid "$prom_pid"

# Ask Prometheus until it has scraped, for at most 20 s; then every
# figure must be the client's.
t /usr/bin/python3 - "$pport" <<'PY' || { cat "$tmpdir/prometheus.log"; fail "Prometheus did not see the figures"; }
import json, sys, time, urllib.parse, urllib.request
base = "http://127.0.0.1:%s/api/v1/" % sys.argv[1]
def query(q):
    url = base + "query?" + urllib.parse.urlencode({"query": q})
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            res = json.load(r)["data"]["result"]
    except OSError:
        return None
    return float(res[0]["value"][1]) if len(res) == 1 else None
want = {
    'nbdkit_requests_total{export="",command="read"}': 6,
    'nbdkit_requests_total{export="",command="write"}': 3,
    'nbdkit_requests_total{export="",command="flush"}': 1,
    'nbdkit_request_bytes_total{export="",command="read"}': 20480,
    'nbdkit_request_bytes_total{export="",command="write"}': 1536,
    'nbdkit_request_errors_total{command="read",errno="EINVAL"}': 1,
    'nbdkit_request_duration_seconds_count{command="read"}': 6,
    'nbdkit_request_duration_seconds_bucket{command="read",le="+Inf"}': 6,
    'nbdkit_connections_opened_total': 1,
    'nbdkit_connections_closed_total': 1,
    'nbdkit_build_info{version="1.46.2"}': 1,
    'up{job="nbdkit"}': 1,
}
deadline = time.monotonic() + 20
while True:
    got = {q: query(q) for q in want}
    if got == want:
        break
    if time.monotonic() > deadline:
        sys.exit("Prometheus has %s, want %s" % (got, want))
    time.sleep(0.5)
with urllib.request.urlopen(base + "targets", timeout=2) as r:
    t = json.load(r)["data"]["activeTargets"][0]
assert t["health"] == "up" and t["lastError"] == "", t
PY
