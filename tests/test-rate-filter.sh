#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=rate: bytes moved over time stay under the limits (total,
# per connection, reads and writes apart), loosely bounded both ways;
# zero and trim are free; a rate file changes the limit while the
# server runs; the bytes are the plugin's (same as Debian's nbdkit).
# Bad values exit 1 naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh

pattern_disk $((2 * 1024 * 1024))
compare_own "rate read" read --filter=rate file "$disk" rate=10G \
  connection-rate=5G
compare_own "rate write" write --filter=rate file "$disk" rate=10G
finish

# timed SECONDS_MIN SECONDS_MAX PYTHON: run PYTHON against $uri and
# check it took between the two bounds.
timed ()
{
  local lo="$1" hi="$2"
  shift 2
  t nbdsh -u "$uri" -c - <<PY
import time
t0 = time.monotonic()
$*
d = time.monotonic() - t0
print("took %.2f s (bounds $lo .. $hi)" % d)
assert $lo <= d <= $hi, "took %g s, expected $lo .. $hi" % d
PY
}

# --- Total rate: 8 Mibit/s is 1 MiB/s ---------------------------------------
# The buckets start empty, so 1.5 MiB of reads take at least ~1.5 s.
start_server --filter=rate memory 16M rate=8M
timed 1.2 15 'for i in range(24): h.pread(65536, 65536 * i)'
# Writes have their own bucket, equally limited.
timed 0.8 15 'for i in range(16): h.pwrite(b"w" * 65536, 65536 * i)'
# Zero and trim carry no data: 16 MiB of them are not limited.
timed 0 2 'h.zero(16 << 20, 0); h.trim(8 << 20, 0)'
stop_server

# Two connections share the total: 2 x 768 KiB in parallel >= ~1.5 s.
start_server --filter=rate memory 16M rate=8M
s=$(date +%s%N)
pids=()
for c in 0 1; do
  t nbdsh -u "$uri" -c "
for i in range(12): h.pread(65536, 65536 * (i + 12 * $c))" &
  pids+=($!)
done
wait "${pids[0]}" && wait "${pids[1]}" || fail "a reader failed"
e=$(date +%s%N)
ms=$(( (e - s) / 1000000 ))
echo "two connections under rate=8M: $ms ms"
[ "$ms" -ge 1200 ] || fail "1.5 MiB at 1 MiB/s total took only $ms ms"
stop_server

# --- Per connection: each gets its own 4 Mibit/s ----------------------------
start_server --filter=rate memory 16M connection-rate=4M
s=$(date +%s%N)
pids=()
for c in 0 1; do
  t nbdsh -u "$uri" -c "
import time
t0 = time.monotonic()
for i in range(12): h.pread(65536, 65536 * i)
d = time.monotonic() - t0
assert d >= 1.2, 'connection %d: 768 KiB at 512 KiB/s took %g s' % ($c, d)
" &
  pids+=($!)
done
wait "${pids[0]}" && wait "${pids[1]}" || fail "a connection was not limited"
e=$(date +%s%N)
echo "two connections under connection-rate=4M: $(( (e - s) / 1000000 )) ms"
stop_server

# --- A rate file changes the limit while the server runs --------------------
rf="$tmpdir/rate"
rm -f "$rf"
start_server --filter=rate memory 16M rate=16K rate-file="$rf"
t nbdsh -u "$uri" -c - <<PY
import os, time
def took(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0
# No file yet: rate= holds, 2 KiB/s.
d = took(lambda: h.pread(1024, 0))
assert d >= 0.4, "1 KiB at 2 KiB/s took %g s" % d
# Raise it to 1 Gibit/s, as the page says: a new file renamed over.
with open("$rf.new", "w") as f:
    f.write("1G\n")
os.rename("$rf.new", "$rf")
time.sleep(0.3)
h.pread(512, 0)                  # the first request rereads the file
d = took(lambda: [h.pread(65536, 65536 * i) for i in range(32)])
assert d < 5, "2 MiB after raising the rate took %g s" % d
# Removing the file keeps the last rate.
os.unlink("$rf")
time.sleep(0.3)
d = took(lambda: [h.pread(65536, 65536 * i) for i in range(32)])
assert d < 5, "2 MiB after removing the file took %g s" % d
# Lower it again: 32 Kibit/s is 4 KiB/s, with a burst of 2 s (8 KiB):
# 16 KiB more take about 2 s.
with open("$rf.new", "w") as f:
    f.write("32K")
os.rename("$rf.new", "$rf")
time.sleep(0.3)
h.pread(512, 0)
d = took(lambda: [h.pread(4096, 0) for i in range(4)])
assert d >= 1.5, "16 KiB at 4 KiB/s took %g s" % d
PY
stop_server

# --- Bad parameters: exit 1, one line naming the parameter -------------------
bad ()
{
  refuses "${1%%=*}" --filter=rate memory 1M "$@" ||
    fail "$*: not refused with one line naming ${1%%=*}"
}
bad rate=0
bad rate=fast
bad connection-rate=-1
bad connection-rate=0
bad burstiness=x
bad burstiness=0
bad burstiness=-2
bad rate-limit=1M
