#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The scan filter's probe: scan_progress (offset, count) fires once per
# prefetch the scanning thread sends, in order over the whole disk: a
# 1 MiB disk with scan-size=256K gives (0, 262144) (262144, 262144)
# (524288, 262144) (786432, 262144), and nothing more once done.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

start_server --filter=scan memory 1M scan-size=256K
so="$(filter_so scan)"
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:scan_progress {
  printf(\"%llu progress %d %d\\n\", nsecs, arg0, arg1); }"
t nbdsh -u "$uri" -c 'import time; time.sleep(1)'
trace_stop
cat "$tmpdir/trace"
grep ' progress ' "$tmpdir/trace" | sort -n | cut -d' ' -f2- > "$tmpdir/got" || :
printf 'progress %s\n' "0 262144" "262144 262144" "524288 262144" \
  "786432 262144" > "$tmpdir/want"
diff -u "$tmpdir/want" "$tmpdir/got" ||
  fail "scan_progress did not fire as expected"
