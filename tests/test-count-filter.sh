#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=count: at exit the debug log has the bytes read, written,
# zeroed and trimmed by every connection of the server's life, counting
# only requests that succeeded (a trim failed by the error filter below
# is left out), and the data passes through unchanged.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy

inject="$tmpdir/inject"
export INJECT="$inject"
t "$NBDKIT" -v -U - --filter=count --filter=error memory 1M \
  error=EIO error-trim-rate=100% error-trim-file="$inject" \
  --run '
nbdsh -u "$uri" -c "
h.pwrite(b\"x\" * 4096, 0)
h.pwrite(b\"y\" * 100, 8192)
assert h.pread(4096, 0) == b\"x\" * 4096
h.zero(65536, 65536)
"
nbdsh -u "$uri" -c "
import os
assert h.pread(100, 8192) == b\"y\" * 100
h.trim(4096, 131072)
open(os.environ[\"INJECT\"], \"w\").close()
try:
    h.trim(8192, 0)
except nbd.Error as e:
    assert e.errno == \"EIO\", e.errno
else:
    raise AssertionError(\"trim did not fail\")
"
nbdcopy --no-extents "$uri" null:
' 2> "$tmpdir/log"
grep 'count bytes' "$tmpdir/log" || { cat "$tmpdir/log"; fail "no totals"; }
# Read: 4096 + 100 + the whole 1M of nbdcopy.
want="count bytes: read $((4096 + 100 + 1048576)), written 4196, zeroed 65536, trimmed 4096"
grep -q "$want\$" "$tmpdir/log" || fail "wanted '$want'"
[ "$(grep -c 'count bytes' "$tmpdir/log")" -eq 1 ] || fail "totals not once"
