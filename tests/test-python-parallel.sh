#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The GIL does not serialise the python plugin's requests: a script
# whose pread blocks (time.sleep, which releases the GIL, as file and
# socket I/O do) and which asks for THREAD_MODEL_PARALLEL serves 8
# reads in flight at once in about the time of one; the same script
# with the default SERIALIZE_ALL_REQUESTS takes 8 times as long.  The
# script also counts the callbacks inside pread at once.  Catches a
# plugin holding the GIL outside the script, or across the server's
# own waits, and a thread model that is not the script's.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

cat > "$tmpdir/slow.py" <<'PY'
import os
import threading
import time

import nbdkit

API_VERSION = 2
lock = threading.Lock()
inside = 0
most = 0

def thread_model():
    if os.environ.get("MODEL") == "parallel":
        return nbdkit.THREAD_MODEL_PARALLEL
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS

def open(readonly):
    return 1

def get_size(h):
    return 1024 * 1024

def pread(h, buf, offset, flags):
    global inside, most
    with lock:
        inside += 1
        most = max(most, inside)
    time.sleep(0.4 if offset < 65536 else 0.02)
    with lock:
        inside -= 1
    buf[:] = most.to_bytes(len(buf), "little")
PY

# The client: 8 reads in flight; prints the seconds they took and the
# most preads the script saw at once (returned in the data).  Our
# server starts a connection with one worker thread and adds workers
# while requests are slow: 48 short reads (0.02 s) first let the pool
# grow, as it would under a steady load.
client='
import time
def batch(n, base):
    bufs = [nbd.Buffer(8) for i in range(n)]
    for i, b in enumerate(bufs):
        h.aio_pread(b, base + i * 4096)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    return bufs
batch(48, 65536)
t0 = time.monotonic()
bufs = batch(8, 0)
print("%.2f" % (time.monotonic() - t0),
      max(int.from_bytes(b.to_bytearray(), "little") for b in bufs))
'
for model in parallel serial; do
  MODEL=$model t "$NBDKIT" -U - python "$tmpdir/slow.py" \
    --run "nbdsh -u \"\$uri\" -c '$client'" > "$tmpdir/$model"
  echo "$model: $(cat "$tmpdir/$model") (seconds, most at once)"
done
read -r secs most < "$tmpdir/parallel"
awk -v s="$secs" 'BEGIN { exit !(s < 2.0) }' ||
  fail "parallel: 8 reads of 0.4 s took $secs s"
[ "$most" -ge 4 ] || fail "parallel: at most $most preads ran at once"
read -r secs most < "$tmpdir/serial"
awk -v s="$secs" 'BEGIN { exit !(s >= 3.0) }' ||
  fail "serialize_all_requests: 8 reads of 0.4 s took only $secs s"
[ "$most" -eq 1 ] || fail "serialize_all_requests: $most preads at once"
