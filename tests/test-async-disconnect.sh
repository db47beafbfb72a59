#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A client that hangs up with requests in flight in an asynchronous
# plugin (nbdkit-async(3)): the server does not crash, cancels them
# (the plugin's cancel), waits for every completion before it closes
# the plugin's handle (the example-async plugin reports an error from
# close if any is still in flight, and how many it was handed and
# completed), keeps no descriptor and, under valgrind, leaks nothing.
source "$(dirname "$0")/functions.sh"
requires_cmd python3

# Send N reads of 1 s, wait until the server has taken them in, and
# vanish without NBD_CMD_DISC.
cat > "$tmpdir/hangup.py" <<'PY'
import nbd, os, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
n = int(sys.argv[2])
bufs = [nbd.Buffer(4096) for i in range(n)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
    h.aio_pwrite(b"w" * 4096, 512 * 1024 + i * 4096)
for i in range(20):
    h.poll(10)
os._exit(0)
PY

fds () { ls "/proc/$server_pid/fd" | wc -l; }

# Both ways of completing: the plugin's own thread per connection, and
# the server's event loop (whose watch each close removes).
for loop in own server; do
  start_server -v example-async size=1M delay=1000 loop=$loop \
    2> "$tmpdir/log"
  # One connection first, so that everything made once per server (the
  # stall watcher, the probe watcher) is there before the count.
  t python3 "$tmpdir/hangup.py" "$uri" 1
  wait_for_output "$tmpdir/log" 'close: 2 requests submitted' "$server_pid" ||
    fail "loop=$loop: the first connection did not close"
  before=$(fds)
  for i in 1 2 3 4 5; do
    t python3 "$tmpdir/hangup.py" "$uri" 32
  done
  # Each connection closes once its requests have completed: the plugin's
  # cancel makes that at once, not after 1 s.
  for (( i = 0; i < 100; i++ )); do
    [ "$(grep -c 'close: 64 requests submitted, 64 completed' "$tmpdir/log")" -eq 5 ] &&
      break
    sleep 0.1
  done
  cat "$tmpdir/log" | grep -E 'cancel|close|error' || :
  [ "$(grep -c 'close: 64 requests submitted, 64 completed' "$tmpdir/log")" -eq 5 ] ||
    fail "loop=$loop: not every connection closed with all its requests completed"
  grep -q 'cancel: [1-9][0-9]* requests in flight' "$tmpdir/log" ||
    fail "loop=$loop: the plugin was not asked to cancel"
  # From the server's event loop, the plugin's lines keep its name.
  [ "$loop" = own ] ||
    grep -q '^nbdkit: example-async: debug: timer: [1-9][0-9]* cancelled' \
      "$tmpdir/log" ||
    fail "loop=server: no cancelled completions logged as the plugin's"
  ! grep -q 'close with' "$tmpdir/log" ||
    fail "loop=$loop: the plugin was closed with requests in flight"
  kill -0 "$server_pid" || fail "loop=$loop: the server died"
  after=$(fds)
  [ "$after" -eq "$before" ] ||
    fail "loop=$loop: the server had $before descriptors before and $after after"
  # It still serves.
  t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0); assert h.pread(512, 0) == b"x" * 512'
  stop_server
done

# Under valgrind: a hang-up with requests in flight leaks nothing, the
# server's event loop included.
if command -v valgrind >/dev/null && [ -z "${NBDKIT_SANITIZERS:-}" ]; then
  export NBDKIT_VALGRIND=1 NBDKIT_VALGRIND_LOG="$tmpdir/vg.%p"
  TEST_CMD_TIMEOUT=240
  status=0
  t "$NBDKIT" -U - example-async size=1M delay=1000 loop=server \
    --run 'python3 "'"$tmpdir"'/hangup.py" "$uri" 16' || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$tmpdir"/vg.* >&2
    fail "under valgrind: exit status $status"
  fi
  grep -q 'definitely lost: [1-9]' "$tmpdir"/vg.* && {
    cat "$tmpdir"/vg.* >&2; fail "under valgrind: a leak"; }
fi
:
