#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# protect_refused fires under bpftrace for each refused request, with
# its offset, count and command, and not for requests let through
# (outside the range, or rewriting the same bytes).
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so protect)"
disk="$tmpdir/disk.img"
/usr/bin/python3 -c '
import sys
open(sys.argv[1], "wb").write(bytes(range(1, 256)) * 4112)' "$disk"
start_server --filter=protect file "$disk" protect=4096-8191
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:protect_refused /arg0 > 0 && arg1 > 0/ {
    printf(\"refused %d %d %s\\n\", arg2, arg3, str(arg4)); }"
t nbdsh -u "$uri" -c - <<'PY'
def refused(fn):
    try:
        fn()
    except nbd.Error:
        pass
    else:
        raise AssertionError("not refused")
refused(lambda: h.pwrite(b"x" * 100, 5000))
refused(lambda: h.zero(1024, 3584))
refused(lambda: h.trim(512, 8000))
h.pwrite(h.pread(4096, 4096), 4096)      # same bytes: allowed
h.pwrite(b"y" * 4096, 65536)             # outside: allowed
PY
trace_stop
cat "$tmpdir/trace"
printf '%s\n' "refused 5000 100 write" "refused 3584 1024 zero" \
  "refused 8000 512 trim" > "$tmpdir/want"
grep '^refused' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/want" "$tmpdir/got" || fail "protect_refused: not as expected"
