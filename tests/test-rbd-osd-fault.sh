#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin when the OSD fails under a copy, on a private cluster
# (the shared one must not lose its only OSD under other tests):
#  1. the OSD freezes (SIGSTOP) for longer than timeout= during an
#     nbdcopy through the retry filter: the reads fail with a timeout,
#     the filter reopens and retries, the OSD resumes (SIGCONT) and the
#     copy completes with the right bytes;
#  2. the OSD is killed (SIGKILL; memstore loses its data, so it cannot
#     come back) with a copy's reads in flight on the asynchronous path
#     (no filter, two worker threads, at least 8 reads in flight): the
#     client gets EIO within the timeout rather than a
#     hang, and the server stays up and exits when asked.
# Would catch: a wait on librados without a bound, an error that kills
# the server, a timeout not reported as EIO, a retry that serves wrong
# bytes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh cmp
requires test -d "$abs_top_builddir/filters/retry"
img=fault
source "$srcdir/rbd-private-cluster.sh"

# serve LOG ARGS...: a server on $sock with its stderr in LOG.
serve ()
{
  local log=$1
  shift
  sock="$tmpdir/sock"
  rm -f "$sock" "$tmpdir/pid"
  "$NBDKIT" -f -U "$sock" -P "$tmpdir/pid" "$@" 2> "$log" 9>&- &
  server_pid=$!
  cleanup_fn _kill_pid "$server_pid"
  wait_for 20 -s "$tmpdir/pid" || { cat "$log"; fail "server did not start"; }
  uri="nbd+unix:///?socket=$sock"
}

# 1. Freeze and resume, through the retry filter.  The delay filter
# makes the copy last long enough (96 reads of 256 KiB, 40 ms each).
serve "$tmpdir/server1.log" -r --filter=retry --filter=delay \
  rbd "${args[@]}" retries=20 retry-delay=1 rdelay=40ms
timeout 120 nbdcopy --connections=1 --requests=1 "$uri" "$tmpdir/copy" \
  9>&- &
copy=$!
sleep 1
kill -STOP "$osd"
sleep 4.5
kill -CONT "$osd"
SECONDS=0
wait "$copy" || fail "the copy through the retry filter failed"
echo "copy done ${SECONDS}s after the OSD resumed"
cmp "$tmpdir/src" "$tmpdir/copy" || fail "the retried copy has wrong bytes"
cat "$tmpdir/server1.log"
grep -q 'rbd.*read at .*: Connection timed out' "$tmpdir/server1.log" ||
  fail "no read timed out while the OSD was frozen (the test proved nothing)"
stop_server

# 2. Kill the OSD with a copy's requests in flight, on the asynchronous
# path (no filter).  A first client opens the image while the OSD can
# still answer; then the OSD freezes, the copy's reads pile up in
# librbd, and the OSD dies under them.
serve "$tmpdir/server2.log" -v -t 2 rbd "${args[@]}"
timeout 60 nbdsh -u "$uri" -c '
import time
print("open", flush=True)
time.sleep(50)' \
  > "$tmpdir/holder" 9>&- &
cleanup_fn _kill_pid $!
wait_for 20 -s "$tmpdir/holder" || fail "the first client did not connect"
kill -STOP "$osd"
timeout 60 nbdcopy --no-extents --connections=1 --requests=16 "$uri" \
  "$tmpdir/copy2" 9>&- 2> "$tmpdir/copy2.err" &
copy=$!
SECONDS=0
sleep 1
kill -9 "$osd"
st=0
wait "$copy" || st=$?
cat "$tmpdir/copy2.err"
echo "the copy ended (status $st) ${SECONDS}s after the kill"
[ $st -ne 0 ] || fail "the copy succeeded with the OSD dead"
[ $st -ne 124 ] || fail "the copy hung with the OSD dead"
grep -q 'Input/output error' "$tmpdir/copy2.err" ||
  fail "the client did not get EIO"
[ $SECONDS -lt 15 ] || fail "the client waited ${SECONDS}s for EIO"
kill -0 "$server_pid" || fail "the server died with the OSD"
grep -q "$img: read at .*: Connection timed out" "$tmpdir/server2.log" ||
  { cat "$tmpdir/server2.log"; fail "the server did not say why the read failed"; }
# Two worker threads (-t 2) wait for two reads at most: more timed out
# at once on the asynchronous path (how many more depends on how many
# nbdcopy had sent in the second before the kill: 7 of 16 under ASan on
# a loaded machine, more elsewhere).
n=$(grep -c "$img: read at .*: Connection timed out" "$tmpdir/server2.log")
[ "$n" -gt 2 ] || fail "$n reads timed out: not the asynchronous path"
grep -Ev 'debug: (pread|.*NBD_OPT|.*handshake)' "$tmpdir/server2.log" | tail -n 20
# Asked to stop, the server exits within the bound of its waits.
kill "$server_pid"
for (( i = 0; i < 150; i++ )); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$server_pid" 2>/dev/null && fail "the server did not exit 15 s after SIGTERM"
echo "the server exited $((i / 10)).$((i % 10))s after SIGTERM"
