#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The map filter's probe: a read across two map ranges and the
# unmapped bytes between them fires map_piece once per piece, in order,
# with the piece's offset, length, where it goes below, and which map
# parameter placed it (-1 for none).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires_tracer

so="$(filter_so map)"
start_server --filter=map memory 1M map=4096-8191:65536 \
  map=0-16383:131072
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:map_piece /arg0 != 0 && arg1 != 0/ { printf(\"piece %d %d %d %d\\n\", arg2, arg3, arg4, arg5); }"
t nbdsh -u "$uri" -c 'h.pread(20000, 2000)'
trace_stop

grep '^piece ' "$tmpdir/trace" > "$tmpdir/got" || :
cat "$tmpdir/got"
# 2000-4095 from parameter 1 (what parameter 0 leaves of it), 4096-8191
# from parameter 0, 8192-16383 from parameter 1, 16384-21999 as is.
cat > "$tmpdir/expected" <<EOT
piece 2000 2096 133072 1
piece 4096 4096 65536 0
piece 8192 8192 139264 1
piece 16384 5616 16384 -1
EOT
diff -u "$tmpdir/expected" "$tmpdir/got" ||
  { cat "$tmpdir/trace.err"; fail "map_piece: not the expected pieces"; }
