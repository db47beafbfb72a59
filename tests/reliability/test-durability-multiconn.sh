#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Durability across connections: when the export advertises multi-conn
# (the file plugin does, and so does the cache filter over it), a flush
# on one connection makes durable what every connection had written and
# seen acknowledged (NBD protocol, "multi-conn").  Connection A writes
# (16 in flight, no FUA), connection B only flushes, the server is
# killed with SIGKILL at a different moment in each run, and every block
# that A saw acknowledged before a flush that B then saw succeed must be
# in the file (durability.py --conns 2 --flush-conn 1).  The helper
# fails if the export does not advertise multi-conn.
# Catches: a flush that writes back only the dirty blocks of its own
# connection while multi-conn is advertised (a per-connection cache or
# overlay), or multi-conn advertised by a stack that cannot honour it.
source "$(dirname "$0")/../functions.sh"
dur_opts=(--conns 2 --flush-conn 1 --fua 0)
dur_stop=kill
source "$(dirname "$0")/durability-lib.sh"

for run in 1 2 3; do
  after="0.$(( run * 3 - 1 ))"        # 0.2, 0.5, 0.8 s
  run_case cache-writeback $run "$after" --filter=cache file "$disk" \
    cache=writeback
done
for run in 4 5; do
  run_case file $run "0.$(( run - 1 ))5" file "$disk"
done

awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "=");
         if (kv[1] == "blocks-checked") c += kv[2];
         if (kv[1] == "blocks-lost") l += kv[2] } }
     END { printf "total: %d runs, %d blocks checked, %d blocks lost\n",
           NR, c, l }' "$tmpdir/figures"
