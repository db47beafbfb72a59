#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=offset offset=N range=M serves the plugin's bytes [N, N+M):
# reads see the shifted data, writes land shifted in the file, and the
# export ends at M.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

disk="$tmpdir/disk.img"
/usr/bin/python3 -c '
import sys
sys.stdout.buffer.write(bytes((i // 512) % 251 for i in range(1024 * 1024)))
' > "$disk"

start_server --filter=offset file "$disk" offset=4096 range=65536
t nbdsh -u "$uri" -c - <<PY
import errno
disk = open("$disk", "rb").read()
assert h.get_size() == 65536, h.get_size()
assert h.pread(65536, 0) == disk[4096:4096 + 65536], "read not offset"
assert h.pread(512, 1000) == disk[4096 + 1000:4096 + 1512]
h.pwrite(b"through-the-filter", 100)
h.flush()
h.set_strict_mode(0)
try:
    h.pread(512, 65536)
except nbd.Error as ex:
    assert ex.errnum == errno.EINVAL, ex
else:
    raise AssertionError("read past range succeeded")
PY
got="$(dd if="$disk" bs=1 skip=$((4096 + 100)) count=18 status=none)"
[ "$got" = through-the-filter ] || fail "write did not land at offset+100: '$got'"

# Without range= the export runs to the end of the plugin's data.
stop_server
start_server --filter=offset file "$disk" offset=4096
t nbdsh -u "$uri" -c "assert h.get_size() == 1024 * 1024 - 4096, h.get_size()"
