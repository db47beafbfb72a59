#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# 8 connections write disjoint regions at the same time; afterwards every
# byte of the disk is what its writer wrote.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 32M      # 8 regions of 4 MiB
pids=()
for i in 0 1 2 3 4 5 6 7; do
  t nbdsh -u "$uri" -c - <<PY &
import os
region = 4 * 1024 * 1024
base = $i * region
chunk = 64 * 1024
# Queue every write at once (asynchronous) so that requests overlap.
buf = bytes([$i * 16 + 1]) * chunk
cookies = [h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(buf)), base + off)
           for off in range(0, region, chunk)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
PY
  pids+=($!)
done
for p in "${pids[@]}"; do
  wait "$p" || fail "writer $p failed"
done

t nbdsh -u "$uri" -c - <<'PY'
region = 4 * 1024 * 1024
for i in range(8):
    data = h.pread(region, i * region)
    want = bytes([i * 16 + 1]) * region
    if data != want:
        bad = next(j for j in range(region) if data[j] != want[j])
        raise AssertionError("region %d wrong at byte %d" % (i, i * region + bad))
print("all 8 regions verified")
PY
