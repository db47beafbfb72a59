#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The openonce filter's probes: openonce_open for each client open
# (first = 1 when it opened the plugin, the count of client opens so
# far), and openonce_close for each shared open as the server exits.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so openonce)"
start_server --filter=openonce memory 1M
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:openonce_open {
  printf(\"open %s %d %d %d\\n\", str(arg0), arg1, arg2, arg3);
}
usdt:$so:nbdkit:openonce_close {
  printf(\"close %s %d %d\\n\", str(arg0), arg1, arg2);
}"
t nbdsh -u "$uri" -c 'h.pwrite(b"x", 0)'
t nbdsh -u "$uri" -c 'assert h.pread(1, 0) == b"x"'
t nbdsh -u "${uri/\/\/\/\?/\/\/\/other?}" -c 'h.pread(1, 0)'
t nbdsh -u "$uri" -c 'h.pread(1, 0)'
stop_server
trace_stop
cat "$out"
grep -E '^(open|close) ' "$out" | sort > "$tmpdir/got"
sort > "$tmpdir/want" <<'W'
open  0 1 1
open  0 0 2
open other 0 1 1
open  0 0 3
close  0 3
close other 0 1
W
diff -u "$tmpdir/want" "$tmpdir/got" || fail "unexpected openonce probes"
