#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# exportname_refused (name) fires, with the name asked for, when
# exportname-strict=true refuses a client: once for "bad", once for ""
# (the default export, not listed), never for the listed "good".
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so exportname)"
start_server --filter=exportname memory 1M exportname-strict=true \
  exportname=good
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:exportname_refused { printf(\"refused '%s'\\n\", str(arg0)); }"
t nbdsh -c "
sock = '$sock'
for name, ok in (('bad', False), ('', False), ('good', True)):
    x = nbd.NBD()
    x.set_export_name(name)
    try:
        x.connect_unix(sock)
        assert ok, 'export %r served' % name
        x.shutdown()
    except nbd.Error:
        assert not ok, 'export %r refused' % name
"
trace_stop
cat "$tmpdir/trace"
grep "^refused" "$tmpdir/trace" | sort > "$tmpdir/got"
printf "refused ''\nrefused 'bad'\n" | diff - "$tmpdir/got" ||
  fail "expected exactly one exportname_refused for 'bad' and one for ''"
