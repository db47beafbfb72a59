#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=spinning: the export is rotational and not multi-conn, the
# bytes pass through, reads in order cost no seek while a far read
# waits at least its seek time (the whole disk: max-seek-time, half:
# half-seek-time); separate heads move alone, heads on one arm move
# together.  Seek times that shrink with distance, and bad head counts,
# are refused.  Only lower bounds on times are asserted where the
# machine's slowness could add to them; "fast" means well under the
# smallest seek.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

seeks="min-seek-time=100ms half-seek-time=200ms max-seek-time=0.4"
start_server --filter=spinning memory 64M $seeks
t nbdinfo --json "$uri" > "$tmpdir/info"
grep -q '"is_rotational": true' "$tmpdir/info" || fail "not rotational"
grep -q '"can_multi_conn": false' "$tmpdir/info" || fail "multi-conn"
t nbdsh -u "$uri" -c - <<'PY'
import time
M = 1 << 20
def took(off, n=4096):
    t0 = time.monotonic()
    h.pread(n, off)
    return time.monotonic() - t0

h.pwrite(b"spin" * 1024, 40 * M)           # a seek, from 0 to 40M
assert h.pread(4096, 40 * M) == b"spin" * 1024
assert took(40 * M + 4096) < 0.09           # the next block: no seek
t0 = time.monotonic()
for i in range(16):
    h.pread(4096, i * 4096)                 # a seek back (0.24 s), then none
d = time.monotonic() - t0
assert 0.2 <= d < 1.0, d              # 15 more seeks: >= 1.74 s
assert took(64 * M - 4096) >= 0.39          # the whole disk
assert took(32 * M) >= 0.19                 # half of it
assert took(32 * M + 65536) < 0.09          # within a track
PY
stop_server

# Two heads: with separate arms, reading in the second half does not
# move the first head; on one arm it does.
for sep in true false; do
  start_server --filter=spinning memory 64M $seeks heads=2 separate-heads=$sep
  SEP=$sep t nbdsh -u "$uri" -c - <<'PY'
import os, time
M = 1 << 20
def took(off):
    t0 = time.monotonic()
    h.pread(4096, off)
    return time.monotonic() - t0
assert took(16 * M) >= 0.19                 # head 0: half its part
d = took(32 * M)                            # head 1: start of its part
if os.environ["SEP"] == "true":
    assert d < 0.09, d
else:
    assert d >= 0.19, d                     # the arm was at 16M of 32M
PY
  stop_server
done

for bad in "min-seek-time=1 max-seek-time=0.5" "half-seek-time=0.6" \
           heads=0 heads=65 separate-heads=maybe min-seek-time=fast; do
  refuses "seek|heads" --filter=spinning memory 1M $bad ||
    fail "$bad was accepted"
done
