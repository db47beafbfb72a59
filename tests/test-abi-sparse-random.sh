#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin ABI: Debian's prebuilt nbdkit-sparse-random-plugin.so, loaded by
# path into OUR server: reads are deterministic for a seed (two
# servers read the same bytes), the data is not all zero, writes of the
# same data succeed and writes of other data fail with EIO.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy
plugin="$debian_plugindir/nbdkit-sparse-random-plugin.so"
requires test -f "$plugin"

params=(size=64M seed=4242 percent=30 runlength=65536)
t "$NBDKIT" -U - "$plugin" "${params[@]}" --run "nbdcopy \"\$uri\" $tmpdir/a"
t "$NBDKIT" -U - "$plugin" "${params[@]}" --run "nbdcopy \"\$uri\" $tmpdir/b"
[ "$(stat -c %s "$tmpdir/a")" -eq $((64 * 1024 * 1024)) ] || fail "short read"
cmp "$tmpdir/a" "$tmpdir/b" || fail "same seed gave different data"
if cmp -s "$tmpdir/a" <(head -c $((64 * 1024 * 1024)) /dev/zero); then
  fail "sparse-random data is all zero"
fi

start_server "$plugin" "${params[@]}"
t nbdsh -u "$uri" -c - <<'PY'
first = h.pread(65536, 0)
assert h.pread(65536, 0) == first, "two reads differ"
# The plugin accepts writes of the data it holds and rejects others (EIO).
h.pwrite(first, 0)
import errno
try:
    h.pwrite(bytes(b ^ 0xff for b in first[:4096]), 0)
except nbd.Error as ex:
    assert ex.errnum == errno.EIO, ex
else:
    raise AssertionError("sparse-random accepted a write of different data")
assert h.pread(65536, 0) == first
PY
