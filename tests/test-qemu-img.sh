#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# qemu-img convert a qcow2 image (written with qemu-io) into the server,
# back out again, and `qemu-img compare' both ways.
source "$(dirname "$0")/functions.sh"
requires_cmd qemu-img qemu-io

src="$tmpdir/src.qcow2"
t qemu-img create -q -f qcow2 "$src" 64M
t qemu-io -f qcow2 \
  -c 'write -P 0x55 0 1M' \
  -c 'write -P 0xaa 10M 2M' \
  -c 'write -P 0x01 63M 512' \
  "$src" >/dev/null

start_server memory 64M
t qemu-img convert -n -f qcow2 -O raw "$src" "$uri"
t qemu-img compare -f qcow2 -F raw "$src" "$uri"
t qemu-img convert -f raw -O qcow2 "$uri" "$tmpdir/back.qcow2"
t qemu-img compare "$src" "$tmpdir/back.qcow2"

# And it must be able to tell a difference.
t qemu-io -f raw -c 'write -P 0x77 20M 4k' "$uri" >/dev/null
if t qemu-img compare -q -f qcow2 -F raw "$src" "$uri"; then
  fail "qemu-img compare did not notice a changed sector"
fi
