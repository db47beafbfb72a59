#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's asynchronous path when the OSD stalls with requests
# in flight, on a private cluster (the shared one must not lose its
# only OSD under other tests), with the server under valgrind:
#  - with the image opened by a first client, the OSD freezes
#    (SIGSTOP); a copy puts 32 reads in flight and a
#    second client sends 16 reads and vanishes without NBD_CMD_DISC;
#    meanwhile a third client is served (nbdinfo);
#  - every read times out together after timeout= (at least 40 logged,
#    which two worker threads (-t 2) could not do one request each),
#    the copy fails with EIO, not a hang;
#  - no connection is closed before its last completion: every
#    timed-out completion is logged before the last plugin close;
#  - the OSD resumes (SIGCONT) and the same server copies the image
#    with the right bytes; at exit valgrind reports no error or leak.
# Would catch: a request that never completes, a completion after the
# handle is closed (valgrind), a leaked completion or request.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdinfo python3 cmp
img=stall
source "$srcdir/rbd-private-cluster.sh"

# Send N reads, give the server a moment to take them, vanish.
cat > "$tmpdir/hangup.py" <<'PY'
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
bufs = [nbd.Buffer(65536) for i in range(int(sys.argv[2]))]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 65536)
for i in range(50):
    h.poll(10)
os._exit(0)
PY

vg=()
if command -v valgrind >/dev/null && [ -z "${NBDKIT_SANITIZERS:-}" ]; then
  vg=(env NBDKIT_VALGRIND=1 NBDKIT_VALGRIND_LOG="$tmpdir/vg.%p")
fi
sock="$tmpdir/sock"
"${vg[@]}" "$NBDKIT" -f -v -t 2 -U "$sock" -P "$tmpdir/pid" \
  rbd "${args[@]}" 2> "$tmpdir/log" 9>&- &
server_pid=$!
cleanup_fn _kill_pid "$server_pid"
wait_for 60 -s "$tmpdir/pid" ||
  { cat "$tmpdir/log"; fail "server did not start"; }
uri="nbd+unix:///?socket=$sock"

# Connections share one open image, opened by the first: a client holds
# it open across the stall (opening needs the OSD).
timeout 120 python3 -c '
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
print("connected", flush=True)
time.sleep(100)' "$uri" > "$tmpdir/holder" 9>&- &
holder=$!
cleanup_fn _kill_pid "$holder"
wait_for 30 -s "$tmpdir/holder" || fail "the first client did not connect"

kill -STOP "$osd"
SECONDS=0
timeout 60 nbdcopy --no-extents --connections=1 --requests=32 \
  "$uri" "$tmpdir/copy" \
  9>&- 2> "$tmpdir/copy.err" &
copy=$!
t python3 "$tmpdir/hangup.py" "$uri" 16 || fail "the vanishing client failed"
t nbdinfo --size "$uri" > /dev/null ||
  fail "the server did not serve a client while the OSD was frozen"
st=0
wait "$copy" || st=$?
cat "$tmpdir/copy.err"
echo "the copy ended (status $st) ${SECONDS}s after the OSD froze"
[ $st -ne 0 ] || fail "the copy succeeded with the OSD frozen"
[ $st -ne 124 ] || fail "the copy hung with the OSD frozen"
grep -q 'Input/output error' "$tmpdir/copy.err" ||
  fail "the client did not get EIO"
[ $SECONDS -lt 20 ] || fail "the client waited ${SECONDS}s for EIO"

# Every read in flight completes, then the connections close.
timed_out () { grep -c 'read at .*: Connection timed out' "$tmpdir/log" || :; }
for (( i = 0; i < 150; i++ )); do
  [ "$(timed_out)" -ge 48 ] &&
    [ "$(grep -c 'rbd\[[0-9]*\]: debug: close$' "$tmpdir/log")" -ge 3 ] &&
    break
  sleep 0.1
done
grep -E 'error|cancel|close' "$tmpdir/log" | tail -n 20
[ "$(timed_out)" -ge 40 ] ||
  fail "only $(timed_out) reads timed out together: not the asynchronous path"
grep -q 'async: [0-9]* requests in flight at the end: cancelling' \
  "$tmpdir/log" || fail "no connection ended with requests in flight"
last_line () { grep -n "$1" "$tmpdir/log" | tail -1 | cut -d: -f1; }
last_timeout=$(last_line 'Connection timed out')
last_close=$(last_line 'rbd\[[0-9]*\]: debug: close$')
[ -n "$last_close" ] && [ "$last_close" -gt "$last_timeout" ] ||
  fail "a connection was closed before its last completion"
kill -0 "$server_pid" || fail "the server died"

# The OSD resumes: the same server serves the right bytes again.
kill -CONT "$osd"
t nbdcopy --requests=32 "$uri" "$tmpdir/copy2" ||
  fail "the copy after the OSD resumed failed"
cmp "$tmpdir/src" "$tmpdir/copy2" || fail "the copy after the stall differs"

kill "$server_pid"
st=0
for (( i = 0; i < 300; i++ )); do
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$server_pid" || st=$?
server_pid=
if [ ${#vg[@]} -gt 0 ]; then
  grep -E 'ERROR SUMMARY|definitely lost' "$tmpdir"/vg.*
  [ $st -ne 119 ] || { cat "$tmpdir"/vg.*; fail "valgrind found errors"; }
  grep -q 'ERROR SUMMARY: 0 errors' "$tmpdir"/vg.* ||
    { cat "$tmpdir"/vg.*; fail "valgrind found errors"; }
fi
[ $st -eq 0 ] || fail "the server exited with status $st"
