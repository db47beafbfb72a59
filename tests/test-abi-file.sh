#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin ABI: Debian's prebuilt nbdkit-file-plugin.so, loaded by path
# into OUR server: writes through NBD reach the file on disk and reads
# return what is in the file.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$debian_plugindir/nbdkit-file-plugin.so"
requires test -f "$plugin"

disk="$tmpdir/disk.img"
truncate -s 4M "$disk"
printf 'on-disk-bytes' | dd of="$disk" bs=1 seek=100000 conv=notrunc status=none

start_server "$plugin" "$disk"
t nbdsh -u "$uri" -c - <<'PY'
assert h.get_size() == 4 * 1024 * 1024
assert h.pread(13, 100000) == b"on-disk-bytes"
h.pwrite(b"written-over-nbd", 2 * 1024 * 1024)
h.flush()
assert h.pread(16, 2 * 1024 * 1024) == b"written-over-nbd"
PY
got="$(dd if="$disk" bs=1 skip=$((2 * 1024 * 1024)) count=16 status=none)"
[ "$got" = "written-over-nbd" ] || fail "file on disk has '$got'"
