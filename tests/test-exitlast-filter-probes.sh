#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# exitlast_exit fires under bpftrace once, when the last of three
# clients (two at once, then one) leaves, with 3 clients served.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh nbdinfo
tracing_lock

so="$(filter_so exitlast)"
start_server --filter=exitlast memory 1M
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:exitlast_exit { printf(\"exit %d\\n\", arg0); }"
t nbdsh -c "
import nbd
a = nbd.NBD()
a.connect_uri('$uri')
h.connect_uri('$uri')
h.shutdown()
c = nbd.NBD()
c.connect_uri('$uri')
c.shutdown()
a.shutdown()
"
wait_for 20 ! -e "/proc/$server_pid" || fail "the server did not exit"
trace_stop
cat "$tmpdir/trace"
[ "$(grep -c '^exit' "$tmpdir/trace")" -eq 1 ] &&
  grep -qx 'exit 3' "$tmpdir/trace" || fail "expected exitlast_exit (3) once"
