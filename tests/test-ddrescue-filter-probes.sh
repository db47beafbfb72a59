#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ddrescue filter's probe: ddrescue_refused (offset, count) fires
# once for each read refused with EIO, with its offset and length, and
# not for reads of finished blocks.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

printf '0x10000 -\n0x0 0x10000 +\n0x10000 0x1000 -\n0x11000 0xf000 +\n' \
  > "$tmpdir/disk.map"
start_server --filter=ddrescue memory 1M ddrescue-mapfile="$tmpdir/disk.map"
so="$(filter_so ddrescue)"
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:ddrescue_refused /arg0 != 0 && arg1 != 0/ {
  printf(\"refused %d %d\\n\", arg2, arg3); }"
t nbdsh -u "$uri" -c '
def refused(count, offset):
    try:
        h.pread(count, offset)
    except nbd.Error:
        return
    raise AssertionError("read succeeded")
h.pread(4096, 0)                 # finished: no probe
refused(1024, 65536 - 512)
h.pread(512, 0x11000)            # finished: no probe
refused(512, 0x10800)
refused(4096, 0x40000)
'
trace_stop
cat "$tmpdir/trace"
grep '^refused ' "$tmpdir/trace" > "$tmpdir/got" || :
printf 'refused %s\n' "65024 1024" "67584 512" "262144 4096" > "$tmpdir/want"
diff -u "$tmpdir/want" "$tmpdir/got" ||
  fail "ddrescue_refused did not fire as expected"
