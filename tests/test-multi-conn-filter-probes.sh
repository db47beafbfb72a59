#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# multi_conn_flush (flushed, connections): with three clients under
# emulate, a write on one and a read on another, a flush flushes those
# two of the three (2 3); a flush right after finds nothing dirty
# (0 3).  Under plugin mode a flush with nothing written is skipped
# (0 1) and one after a write goes through (1 1).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so multi-conn)"
prog="usdt:$so:nbdkit:multi_conn_flush { printf(\"flush %d %d\\n\", arg0, arg1); }"
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
cat "$tmpdir/emulate"
printf 'flush 2 3\nflush 0 3\n' | diff - <(grep "^flush" "$tmpdir/emulate") >/dev/null ||
  fail "emulate: expected 'flush 2 3' then 'flush 0 3'"

start_server --filter=multi-conn memory 1M multi-conn-mode=plugin
trace_start "$tmpdir/plugin" "$prog"
t nbdsh -u "$uri" -c '
h.flush()
h.pwrite(b"x" * 512, 0)
h.flush()
'
trace_stop
cat "$tmpdir/plugin"
printf 'flush 0 1\nflush 1 1\n' | diff - <(grep "^flush" "$tmpdir/plugin") >/dev/null ||
  fail "plugin: expected 'flush 0 1' then 'flush 1 1'"
