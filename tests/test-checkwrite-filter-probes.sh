#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The checkwrite filter's probe: checkwrite_mismatch (offset, count)
# fires once for each write, zero or trim that differs from the
# plugin's data, with that request's offset and length, and never for
# one that matches.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

disk="$tmpdir/disk.img"
/usr/bin/python3 -c '
import sys
sys.stdout.buffer.write(bytes(65536) + b"\1" * 65536 + bytes(65536))
' > "$disk"

start_server --filter=checkwrite file "$disk"
so="$(filter_so checkwrite)"
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:checkwrite_mismatch /arg0 != 0 && arg1 != 0/ {
  printf(\"mismatch %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
def fails(fn):
    try:
        fn()
    except nbd.Error:
        return
    raise AssertionError("request succeeded")
h.pwrite(b"\1" * 4096, 65536)            # matches: no probe
h.zero(8192, 0)                          # matches: no probe
fails(lambda: h.pwrite(b"\2" * 4096, 69632))
fails(lambda: h.zero(1000, 131000))
fails(lambda: h.trim(65536, 100000))
'
trace_stop
cat "$tmpdir/trace"
grep '^mismatch ' "$tmpdir/trace" > "$tmpdir/got" || :
printf 'mismatch %s\n' "69632 4096" "131000 1000" "100000 65536" \
  > "$tmpdir/want"
diff -u "$tmpdir/want" "$tmpdir/got" ||
  fail "checkwrite_mismatch did not fire as expected"
