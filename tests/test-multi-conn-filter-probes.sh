#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# multi_conn_flush (id, cookie, flushed, connections): with three
# clients under emulate, a write on one and a read on another, a flush
# flushes those two of the three (2 3); a flush right after finds
# nothing dirty (0 3).  Under plugin mode a flush with nothing written
# is skipped (0 1) and one after a write goes through (1 1).  Each
# carries the id and cookie of its flush's request_start (rN: the Nth
# request in trace_join).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so multi-conn)"
prog="$(request_start_clause)
usdt:$so:nbdkit:multi_conn_flush {
  printf(\"%llu flush %d %d %d %d\\n\", nsecs, arg0, arg1, arg2, arg3); }"
clients='
hs = []
for i in range(3):
    x = nbd.NBD()
    x.connect_uri(uri)
    hs.append(x)
a, b, c = hs
'

start_server --filter=multi-conn memory 1M multi-conn-mode=emulate
trace_start "$tmpdir/emulate" "$prog"
t nbdsh -c "uri = '$uri'" -c "$clients" -c '
a.pwrite(b"x" * 512, 0)
b.pread(512, 0)
a.flush()
c.flush()
'
trace_stop
stop_server
trace_in_order "$tmpdir/emulate" > "$tmpdir/emulate.ordered"
trace_join "$tmpdir/emulate.ordered" | tee "$tmpdir/emulate.got"
printf 'flush r3 2 3\nflush r4 0 3\n' | diff - "$tmpdir/emulate.got" ||
  fail "emulate: expected 'flush r3 2 3' then 'flush r4 0 3'"

start_server --filter=multi-conn memory 1M multi-conn-mode=plugin
trace_start "$tmpdir/plugin" "$prog"
t nbdsh -u "$uri" -c '
h.flush()
h.pwrite(b"x" * 512, 0)
h.flush()
'
trace_stop
trace_in_order "$tmpdir/plugin" > "$tmpdir/plugin.ordered"
trace_join "$tmpdir/plugin.ordered" | tee "$tmpdir/plugin.got"
printf 'flush r1 0 1\nflush r3 1 1\n' | diff - "$tmpdir/plugin.got" ||
  fail "plugin: expected 'flush r1 0 1' then 'flush r3 1 1'"
