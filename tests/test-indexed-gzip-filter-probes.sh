#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The indexed-gzip filter's probes under bpftrace: a first server makes
# the index (indexed_gzip_index_built: points, compressed and
# uncompressed bytes), a second loads it (indexed_gzip_index_loaded);
# each read seeks to the right point (indexed_gzip_seek: point, its
# offset, bytes skipped) or carries on the connection's stream
# (indexed_gzip_continue: stream offset, bytes skipped), with the point
# offsets read from the index file the first server wrote.
# The probes that fire during a request carry its connection id and
# cookie first: the tracer prints only the lines where both are set.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_tracer nbdsh gzip

so="$(filter_so indexed-gzip)"
make_sample "$tmpdir/data" 1000000 8
gzip -c "$tmpdir/data" > "$tmpdir/data.gz"
idx="$tmpdir/data.idx"
args=(--filter=indexed-gzip file "$tmpdir/data.gz" gzip-index-path="$idx"
      gzip-index-span=64K)
program="
usdt:$so:nbdkit:indexed_gzip_index_built { printf(\"built %d %d %d\\n\", arg0, arg1, arg2); }
usdt:$so:nbdkit:indexed_gzip_index_loaded { printf(\"loaded %d %d\\n\", arg0, arg1); }
usdt:$so:nbdkit:indexed_gzip_seek /arg0 > 0 && arg1 > 0/ {
  printf(\"seek %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:indexed_gzip_continue /arg0 > 0 && arg1 > 0/ {
  printf(\"continue %d %d\\n\", arg2, arg3); }"

start_server "${args[@]}"
trace_start "$tmpdir/trace1" "$program"
t nbdsh -u "$uri" -c 'h.pread(512, 0)'
trace_stop
stop_server
# The points' uncompressed offsets, from the index file (see gzindex.c).
mapfile -t P < <(/usr/bin/python3 - "$idx" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", d, 32)[0]
for i in range(n):
    print(struct.unpack_from("<Q", d, 64 + i * (24 + 32768))[0])
PY
)
[ "${#P[@]}" -ge 5 ] || fail "only ${#P[@]} points"

start_server "${args[@]}"
trace_start "$tmpdir/trace2" "$program"
t nbdsh -u "$uri" -c - <<PY
data = open("$tmpdir/data", "rb").read()
for n, off in [(512, 0), (512, 1000), (100, ${P[3]} + 10), (100, 500),
               (10, ${P[2]} - 5), (10, ${P[2]} + 7)]:
    assert h.pread(n, off) == data[off:off + n], off
PY
trace_stop

cat > "$tmpdir/expected" <<EOF2
built ${#P[@]} $(stat -c %s "$tmpdir/data.gz") 1000000
seek 0 0 0
loaded ${#P[@]} 1000000
seek 0 0 0
continue 512 488
seek 3 ${P[3]} 10
seek 0 0 500
seek 1 ${P[1]} $(( P[2] - 5 - P[1] ))
continue $(( P[2] + 5 )) 2
EOF2
cat "$tmpdir/trace1" "$tmpdir/trace2" |
  grep -E '^(built|loaded|seek|continue) ' > "$tmpdir/got" || :
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  fail "indexed-gzip probes: unexpected sequence" \
    "(trace errors: $(cat "$tmpdir/trace1.err" "$tmpdir/trace2.err"))"
