#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin ABI: Debian's prebuilt nbdkit-data-plugin.so, loaded by path
# into OUR server: data="1 2 3" serves those bytes, writes stick.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$debian_plugindir/nbdkit-data-plugin.so"
requires test -f "$plugin"

t "$NBDKIT" -U - "$plugin" data="1 2 3 @0x100 0x41 0x42" size=4096 \
  --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 4096, h.get_size()
assert h.pread(3, 0) == b"\x01\x02\x03"
assert h.pread(2, 0x100) == b"AB"
assert h.pread(16, 0x200) == bytes(16)
h.pwrite(b"xyz", 1)
assert h.pread(4, 0) == b"\x01xyz"
PY

# Without size= the export is exactly as long as the data.
t "$NBDKIT" -U - "$plugin" data="1 2 3" \
  --run 'nbdsh -u "$uri" -c "assert h.get_size() == 3; assert h.pread(3, 0) == b\"\\x01\\x02\\x03\""'
