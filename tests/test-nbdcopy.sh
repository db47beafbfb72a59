#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdcopy a sparse 1 GiB memory disk (with a little data in it) to a file
# and compare checksums with the file we expect; then nbdcopy a file into
# the server and back out again.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh sha256sum

# 1. Server to file.
start_server memory 1G
t nbdsh -u "$uri" -c - <<'PY'
h.pwrite(b"\x55" * 65536, 0)
h.pwrite(b"\xaa" * 4096, 512 * 1024 * 1024 + 1000)
h.pwrite(b"end!", 1024 * 1024 * 1024 - 4)
PY
t nbdcopy "$uri" "$tmpdir/out.img"

truncate -s 1G "$tmpdir/expected.img"
head -c 65536 /dev/zero | tr '\0' '\125' |
  dd of="$tmpdir/expected.img" conv=notrunc status=none
head -c 4096 /dev/zero | tr '\0' '\252' |
  dd of="$tmpdir/expected.img" bs=1 seek=$((512 * 1024 * 1024 + 1000)) \
     conv=notrunc status=none
printf 'end!' |
  dd of="$tmpdir/expected.img" bs=1 seek=$((1024 * 1024 * 1024 - 4)) \
     conv=notrunc status=none

sum_out="$(sha256sum < "$tmpdir/out.img")"
sum_exp="$(sha256sum < "$tmpdir/expected.img")"
echo "copied:   $sum_out"
echo "expected: $sum_exp"
[ "$sum_out" = "$sum_exp" ] || fail "checksums of the 1G copy differ"
stop_server

# 2. File to server and back.
head -c $((16 * 1024 * 1024)) /dev/urandom > "$tmpdir/in.img"
start_server memory 16M
t nbdcopy "$tmpdir/in.img" "$uri"
t nbdcopy "$uri" "$tmpdir/back.img"
cmp "$tmpdir/in.img" "$tmpdir/back.img" || fail "round trip changed data"
