#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Durability under SIGKILL: a client writes unique patterns with FUA on
# some writes and flushes in between, 16 writes in flight, and the
# server is killed with SIGKILL at a moment that differs from run to
# run; then every block that was acknowledged with FUA, or before a
# flush that succeeded, must be in the backing file, and every block
# must hold bytes that some write put there (durability.py says how).
# Stacks: the file plugin alone, --filter=cache cache=writeback, and
# the cache filter with the blocksize filter in front of it (and
# behind it), which splits and read-modify-writes the unaligned writes.
# Catches: a flush or FUA acknowledged before the data reached the
# plugin (a writeback cache that keeps dirty blocks after a flush, a
# FUA that is dropped on the way down), and writes landing torn or in
# the wrong place.
source "$(dirname "$0")/../functions.sh"
dur_opts=()
dur_stop=kill
source "$(dirname "$0")/durability-lib.sh"

for run in 1 2 3; do
  after="0.$(( run * 3 - 1 ))"        # 0.2, 0.5, 0.8 s
  run_case file $run "$after" file "$disk"
  run_case cache-writeback $run "$after" --filter=cache file "$disk" \
    cache=writeback
  # The blocksize filter's blocks (4K) are smaller than the cache's
  # (64K), and its maxdata cuts the cache's write-backs, or the
  # client's writes, into pieces.
  if (( run % 2 )); then
    run_case blocksize+cache $run "$after" --filter=blocksize --filter=cache \
      file "$disk" minblock=4K maxdata=16K
  else
    run_case cache+blocksize $run "$after" --filter=cache --filter=blocksize \
      file "$disk" minblock=4K maxdata=16K
  fi
done

awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "=");
         if (kv[1] == "blocks-checked") c += kv[2];
         if (kv[1] == "blocks-lost") l += kv[2] } }
     END { printf "total: %d runs, %d blocks checked, %d blocks lost\n",
           NR, c, l }' "$tmpdir/figures"
