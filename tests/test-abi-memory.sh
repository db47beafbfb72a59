#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin ABI: Debian's prebuilt nbdkit-memory-plugin.so, loaded by path
# into OUR server, serves reads and writes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$debian_plugindir/nbdkit-memory-plugin.so"
requires test -f "$plugin"

start_server "$plugin" size=8M
t nbdsh -u "$uri" -c - <<'PY'
assert h.get_size() == 8 * 1024 * 1024, h.get_size()
data = bytes(range(256)) * 256
h.pwrite(data, 1024 * 1024 + 5)
assert h.pread(len(data), 1024 * 1024 + 5) == data
assert h.pread(4096, 0) == bytes(4096)
h.zero(4096, 1024 * 1024 + 5)
assert h.pread(4096, 1024 * 1024 + 5) == bytes(4096)
h.flush()
PY
