#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin ABI: Debian's prebuilt nbdkit-pattern-plugin.so, loaded by path
# into OUR server: every 8-byte word holds its own offset, big-endian.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$debian_plugindir/nbdkit-pattern-plugin.so"
requires test -f "$plugin"

t "$NBDKIT" -U - "$plugin" size=16M --run 'nbdsh -u "$uri" -c -' <<'PY'
import struct
assert h.get_size() == 16 * 1024 * 1024
for off in (0, 8, 4096, 1024 * 1024 + 64, 16 * 1024 * 1024 - 4096):
    buf = h.pread(4096, off)
    words = struct.unpack(">512Q", buf)
    assert words == tuple(range(off, off + 4096, 8)), off
# An unaligned read sees the middle of the words.
assert h.pread(8, 4) == struct.pack(">Q", 0)[4:] + struct.pack(">Q", 8)[:4]
PY
