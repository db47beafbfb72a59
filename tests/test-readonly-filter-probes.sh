#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The readonly filter's probes: readonly_switch fires once each time a
# request finds the readonly-file newly there (1) or newly gone (0),
# and readonly_refuse once per refused request with its command, offset
# and count; writes while the file is absent fire nothing.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

so="$(filter_so readonly)"
ro="$tmpdir/ro"
start_server --filter=readonly memory 1M readonly-file="$ro"
out="$tmpdir/trace"
trace_start "$out" "usdt:$so:nbdkit:readonly_switch /arg0 > 0 && arg1 > 0/ {
  printf(\"switch %d\\n\", arg2); }
usdt:$so:nbdkit:readonly_refuse /arg0 > 0 && arg1 > 0/ {
  printf(\"refuse %s %d %d\\n\", str(arg2), arg3, arg4);
}"
RO="$ro" t nbdsh -u "$uri" -c - <<'PY'
import os
ro = os.environ["RO"]
h.pwrite(b"x" * 512, 0)
open(ro, "w").close()
for fn in (lambda: h.pwrite(b"y" * 1024, 4096),
           lambda: h.zero(2048, 8192),
           lambda: h.trim(65536, 65536)):
    try:
        fn()
    except nbd.Error:
        pass
    else:
        raise AssertionError("not refused")
os.remove(ro)
h.zero(512, 0)
h.pwrite(b"z", 0)
PY
sleep 0.5
trace_stop
cat "$out"
grep -E '^(switch|refuse)' "$out" > "$tmpdir/got"
cat > "$tmpdir/want" <<'W'
switch 1
refuse write 4096 1024
refuse zero 8192 2048
refuse trim 65536 65536
switch 0
W
diff -u "$tmpdir/want" "$tmpdir/got" || fail "unexpected readonly probes"
