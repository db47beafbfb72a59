#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Write a pattern with nbdsh, read it back on the same and on a fresh
# connection, and check that the rest of the disk still reads as zeroes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 64M

t nbdsh -u "$uri" -c - <<'PY'
pattern = bytes((i * 7 + 3) % 256 for i in range(1024 * 1024))
h.pwrite(pattern, 3 * 1024 * 1024 + 17)
assert h.pread(len(pattern), 3 * 1024 * 1024 + 17) == pattern
PY

t nbdsh -u "$uri" -c - <<'PY'
pattern = bytes((i * 7 + 3) % 256 for i in range(1024 * 1024))
got = h.pread(len(pattern), 3 * 1024 * 1024 + 17)
assert got == pattern, "pattern lost across connections"
assert h.pread(4096, 0) == bytes(4096), "untouched region is not zero"
assert h.pread(4096, 64 * 1024 * 1024 - 4096) == bytes(4096)
# Unaligned small writes are read back exactly.
h.pwrite(b"hello", 1)
assert h.pread(7, 0) == b"\0hello\0"
PY
