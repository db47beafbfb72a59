#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reads larger than 64 KiB are sent straight from the memory plugin's
# pages (common/zerocopy.h).  Against a model kept in Python, every
# read must return the same bytes the plain path would: across written
# pages, holes, trimmed and zeroed pages, unaligned at both ends, up to
# and past the 1 MiB limit of the direct path (1 MiB + 4 KiB goes the
# copying way), with structured replies and without, and through a
# filter (which turns the direct path off).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

script='
import random
MiB = 1024 * 1024
size = h.get_size()
model = bytearray(size)
rng = random.Random(7)
# Scattered writes of 1 to 40 pages, then holes punched and zeroed.
for i in range(60):
    off = rng.randrange(0, size - 200 * 1024) & ~511
    data = rng.randbytes(rng.randrange(1, 40) * 4096 - rng.randrange(0, 512))
    h.pwrite(data, off)
    model[off:off + len(data)] = data
for i in range(10):
    off = rng.randrange(0, size - 300 * 1024) & ~4095
    n = rng.randrange(1, 60) * 4096
    (h.trim if i % 2 else h.zero)(n, off)
    model[off:off + n] = bytes(n)
sizes = [65536 + 1, 100000, 262144, 262144 + 4095, MiB - 1, MiB,
         MiB + 4096]
for n in sizes:
    for j in range(12):
        off = rng.randrange(0, size - n)
        got = h.pread(n, off)
        assert got == model[off:off + n], (n, off)
# The whole disk, in 1 MiB reads.
for off in range(0, size, MiB):
    assert h.pread(MiB, off) == model[off:off + MiB], off
'

printf '%s\n' "$script" > "$tmpdir/check.py"
for sr in True False; do
  t "$NBDKIT" -U - memory 16M --run "nbdsh \
    -c 'h.set_request_structured_replies($sr)' -c \"h.connect_uri('\$uri')\" \
    -c 'assert h.get_structured_replies_negotiated() == $sr' \
    -c \"exec(open('$tmpdir/check.py').read())\"" ||
    fail "reads differ from the model (structured replies: $sr)"
done
t "$NBDKIT" -U - --filter=offset memory 20M offset=4M range=16M \
  --run "nbdsh -u \"\$uri\" -c \"exec(open('$tmpdir/check.py').read())\"" ||
  fail "reads through a filter differ from the model"
