#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# SIGTERM under deep in-flight writes is a graceful stop (nbdkit(1),
# SIGNALS): a client keeps 64 writes in flight (no flushes), SIGTERM
# comes at a different moment in each run, and then
#  - the server exits 0 on its own (the client does not hang up);
#  - no write fails with an error from the server: the requests it had
#    read are drained, only those it never read fail, with ENOTCONN
#    when the connection closes;
#  - every write the client saw acknowledged is in the file, even
#    through cache=writeback with no flush from the client (the server
#    flushes each connection it stops).
# Stacks: the file plugin; cache=writeback over it; and the delay
# filter (20 ms a write, -t 64) so that all 64 writes are inside the
# server, sleeping, when the signal comes.
# Catches: writes in flight failed at the signal (they failed with
# ESHUTDOWN before the stop drained sleeps), a stop that skips the
# final flush (the writeback cache's acknowledged blocks lost), a
# server that does not exit or exits non-zero.
source "$(dirname "$0")/../functions.sh"
dur_opts=(--signal TERM --depth 64 --fua 0)
dur_stop=SIGTERM
source "$(dirname "$0")/durability-lib.sh"

for run in 1 2; do
  after="0.$(( run * 3 ))"            # 0.3, 0.6 s
  run_case file $run "$after" file "$disk"
  run_case cache-writeback $run "$after" --filter=cache file "$disk" \
    cache=writeback
  run_case delay $run "$after" -t 64 --filter=delay file "$disk" wdelay=20ms
done

awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "=");
         if (kv[1] == "blocks-checked") c += kv[2];
         if (kv[1] == "blocks-lost") l += kv[2];
         if (kv[1] == "acked") a += kv[2] } }
     END { printf "total: %d runs, %d writes acknowledged, %d blocks checked, %d blocks lost\n",
           NR, a, c, l }' "$tmpdir/figures"
