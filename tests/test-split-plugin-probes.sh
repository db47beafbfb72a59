#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The split plugin's probe: split_file (id, cookie, file index, offset
# in the file, count) fires once for each piece of a read or write, so
# a read inside one file fires once and a read across three files fires
# three times, with the offsets and counts of each piece, each with the
# id and cookie of its request's request_start (r1..r3 in trace_join).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
so="$abs_top_builddir/plugins/split/.libs/nbdkit-split-plugin.so"
requires test -f "$so"
requires sh -c "readelf -n '$so' | grep -q 'Name: split_file'"
tracing_lock

truncate -s 10000 "$tmpdir/a"
truncate -s 5000 "$tmpdir/b"
truncate -s 20000 "$tmpdir/c"
start_server split "$tmpdir/a" "$tmpdir/b" "$tmpdir/c"
trace_start "$tmpdir/trace" "$(request_start_clause)
usdt:$so:nbdkit:split_file {
  printf(\"%llu split %d %d %d %d %d\\n\", nsecs, arg0, arg1, arg2, arg3, arg4);
}"
t nbdsh -u "$uri" -c '
h.pread(100, 200)
h.pread(12000, 9000)
h.pwrite(b"x" * 10, 14995)
'
trace_stop
cat "$tmpdir/trace"
trace_in_order "$tmpdir/trace" > "$tmpdir/ordered"
trace_join "$tmpdir/ordered" > "$tmpdir/got"
cat > "$tmpdir/want" <<'EOF2'
split r1 0 200 100
split r2 0 9000 1000
split r2 1 0 5000
split r2 2 0 6000
split r3 1 4995 5
split r3 2 0 5
EOF2
diff -u "$tmpdir/want" "$tmpdir/got" || fail "split_file fired wrongly"
