#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -o: oldstyle negotiation.  libnbd and qemu-io both detect it; data
# written through one reads back through the other, and the export is
# the size the plugin says.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo qemu-io

start_server -o memory 16M

out=$(t nbdinfo "$uri")
echo "$out"
grep -q 'oldstyle' <<<"$out" || fail "nbdinfo did not see an oldstyle server"
grep -q 'export-size: 16777216' <<<"$out" || fail "wrong size"

t qemu-io -f raw -c 'write -P 0x5a 4096 8192' "nbd:unix:$sock"
t nbdsh -u "$uri" -c 'assert h.pread(8192, 4096) == b"\x5a" * 8192'
out=$(t qemu-io -f raw -c 'read -P 0x5a 4096 8192' -c 'read -P 0 0 4096' \
        "nbd:unix:$sock")
echo "$out"
if grep -q 'Pattern verification failed' <<<"$out"; then
  fail "qemu-io read back the wrong bytes"
fi
grep -q 'read 8192/8192 bytes at offset 4096' <<<"$out" ||
  fail "qemu-io did not read"
