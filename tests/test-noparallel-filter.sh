#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=noparallel: with Debian's delay filter under ours making
# every read slow, eight reads in flight at once overlap without the
# filter and run one at a time with serialize=requests (the default)
# or all-requests; two clients' reads overlap under
# serialize=requests and do not under all-requests; under serialize=connections a second client is
# not served until the first leaves, and multi-conn is not advertised.
# Same bytes as Debian's nbdkit; bad modes exit 1 naming the key.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

delay="--filter=$debian_filterdir/nbdkit-delay-filter.so"

# timed CONNS READS WARMUP ARGS...: CONNS clients each with READS reads
# in flight; sets $s to the seconds until all replied.  Our server
# starts a connection with one worker and adds more only after runs of
# slow requests, so each client first does WARMUP rounds of 4 reads.
timed ()
{
  local conns="$1" reads="$2" warmup="$3"
  shift 3
  start_server "$@"
  t nbdsh -c "
import time
def batch(hs, n):
    for x in hs:
        for j in range(n):
            x.aio_pread(nbd.Buffer(512), j * 512)
    for x in hs:
        while x.aio_in_flight() > 0:
            x.poll(-1)
hs = []
for i in range($conns):
    x = nbd.NBD()
    x.connect_uri('$uri')
    hs.append(x)
for i in range($warmup):
    batch(hs, 4)
t0 = time.monotonic()
batch(hs, $reads)
print('%.2f' % (time.monotonic() - t0))
" > "$tmpdir/time"
  stop_server
  s=$(cat "$tmpdir/time")
  echo "${s} s: $conns x $reads reads: $*"
}

# at_least SECS VALUE WHAT / below SECS VALUE WHAT
at_least () { python3 -c "import sys; sys.exit(not $2 >= $1)" ||
  fail "$3: took $2 s, expected at least $1 s"; }
below () { python3 -c "import sys; sys.exit(not $2 < $1)" ||
  fail "$3: took $2 s, expected under $1 s"; }

# One client, 8 reads of 50 ms each: parallel without the filter.
timed 1 8 6 "$delay" memory 1M rdelay=50ms
below 0.3 "$s" "no filter, 8 reads"
timed 1 8 6 --filter=noparallel "$delay" memory 1M rdelay=50ms
at_least 0.38 "$s" "serialize=requests (default), 8 reads"
timed 1 8 6 --filter=noparallel "$delay" memory 1M rdelay=50ms \
  serialise=all-requests
at_least 0.38 "$s" "serialise=all-requests, 8 reads"
# Two clients, 4 reads of 100 ms each: the clients overlap under
# serialize=requests, not under all-requests.
timed 2 4 0 --filter=noparallel "$delay" memory 1M rdelay=100ms \
  serialize=requests
below 0.7 "$s" "serialize=requests, 2 connections x 4 reads"
timed 2 4 0 --filter=noparallel "$delay" memory 1M rdelay=100ms \
  serialize=all-requests
at_least 0.78 "$s" "serialize=all-requests, 2 connections x 4 reads"

# serialize=connections: the second client waits for the first.
start_server --filter=noparallel memory 1M serialize=connections
t nbdsh -c "
import threading, time
a = nbd.NBD()
a.connect_uri('$uri')
assert not a.can_multi_conn()
done = []
def second():
    b = nbd.NBD()
    b.connect_uri('$uri')
    done.append(time.monotonic())
    b.shutdown()
th = threading.Thread(target=second)
th.start()
time.sleep(1)
assert not done, 'second client served while the first was connected'
left = time.monotonic()
a.shutdown()
th.join(20)
assert done and done[0] >= left, 'second client never served'
"
stop_server

# The data path is untouched.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
cp "$disk" "$disk.orig"
compare_own noparallel-read read --filter=noparallel file "$disk"
state_files=("$disk")
compare_own noparallel-write write --filter=noparallel file "$disk" \
  serialize=connections
state_files=()

refuses "^nbdkit: noparallel: error: serialize: unknown mode 'all'" \
  --filter=noparallel null 1M serialize=all || fail "serialize=all not refused"

finish
