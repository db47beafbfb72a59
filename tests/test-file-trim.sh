#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin turns a trim into a hole in the file: the space is freed
# (du shrinks), block status shows a hole, and the range reads as zeroes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo du

disk="$tmpdir/disk.img"
head -c 8M /dev/urandom > "$disk"
sync "$disk" 2>/dev/null || :
before="$(du -k "$disk" | cut -f1)"

start_server file "$disk"
t nbdsh -u "$uri" -c - <<'PY'
assert h.can_trim(), "file plugin does not advertise trim"
h.trim(4 * 1024 * 1024, 2 * 1024 * 1024)
h.flush()
assert h.pread(4 * 1024 * 1024, 2 * 1024 * 1024) == bytes(4 * 1024 * 1024)
PY
t nbdinfo --map "$uri" > "$tmpdir/map"
cat "$tmpdir/map"
awk '$1 == 2097152 && $2 == 4194304 && $3 == 3 { found = 1 } END { exit !found }' \
  "$tmpdir/map" || fail "nbdinfo --map shows no hole at [2M, 6M)"

after="$(du -k "$disk" | cut -f1)"
echo "du before: ${before}K after: ${after}K"
[ "$after" -le $((before - 4096)) ] || fail "trim freed no space in the file"
