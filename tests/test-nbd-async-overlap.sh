#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Through the nbd plugin's asynchronous path, one client's requests
# overlap upstream however few threads the server has: with -t 2 and
# an upstream that holds each read 100 ms, 48 reads sent together end
# within 1.2 s (on the synchronous path, -D nbdkit.async=0, two at a
# time: 2.4 s, which is checked too) while the proxy has at most 8
# threads.  The same with connections=2 (the reads spread over two
# upstream connections, both used).
# Catches: a worker that waits for the upstream's reply, a proxy that
# grows a thread per request, commands left unsent until another
# request wakes the poller.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd python3
# Timing against a 100 ms backend: a busy machine should not decide it.
tracing_lock

start_upstream -t 64 --filter=log --filter=delay memory 4M delay-read=100ms \
  logfile="$tmpdir/up.log"

cat > "$tmpdir/burst.py" <<'PY'
import nbd, os, sys, time
h = nbd.NBD()
h.connect_unix(sys.argv[1])
pid = int(sys.argv[2])
def threads():
    return len(os.listdir("/proc/%d/task" % pid))
t0 = time.monotonic()
bufs = [nbd.Buffer(4096) for i in range(48)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
most = 0
while h.aio_in_flight() > 0 and time.monotonic() - t0 < 30:
    most = max(most, threads())
    h.poll(10)
el = time.monotonic() - t0
assert h.aio_in_flight() == 0, "reads still in flight after 30 s"
print("elapsed %.3f threads %d" % (el, most))
h.shutdown()
PY

# burst SERVER-OPTION PLUGIN-PARAM: the proxy with those (each may
# be empty); sets el and most.
burst ()
{
  local out
  start_server -t 2 ${1:+"$1"} nbd socket="$up_sock" ${2:+"$2"}
  out=$(t python3 "$tmpdir/burst.py" "$sock" "$server_pid") ||
    fail "the reads failed ($*): $out"
  echo "$*: $out"
  read -r _ el _ most <<< "$out"
  stop_server
}

burst
awk -v e="$el" 'BEGIN { exit !(e < 1.2) }' ||
  fail "48 reads of 100 ms took $el s: they did not overlap"
[ "$most" -le 8 ] || fail "the proxy had $most threads"

n=$(wc -l < "$tmpdir/up.log")
burst "" connections=2
awk -v e="$el" 'BEGIN { exit !(e < 1.2) }' ||
  fail "connections=2: 48 reads of 100 ms took $el s"
# Each upstream connection of that client served some of the reads.
tail -n +$(( n + 1 )) "$tmpdir/up.log" | grep -a ' Read ' |
  grep -ao 'connection=[0-9]*' | sort | uniq -c > "$tmpdir/spread"
cat "$tmpdir/spread"
[ "$(wc -l < "$tmpdir/spread")" -eq 2 ] ||
  fail "connections=2: the reads did not go over two upstream connections"
awk '$1 < 12 { exit 1 }' "$tmpdir/spread" ||
  fail "connections=2: the reads were not spread"

# The synchronous path, as a check that the test tells them apart.
burst -Dnbdkit.async=0 ""
awk -v e="$el" 'BEGIN { exit !(e >= 2.0) }' ||
  fail "-D nbdkit.async=0 with -t 2 took only $el s: the test cannot tell"
