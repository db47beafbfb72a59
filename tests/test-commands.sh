#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# FLUSH, FUA writes, CACHE, WRITE_ZEROES (plain, NO_HOLE, FAST_ZERO) and
# TRIM all succeed on a memory disk and leave the right bytes behind.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 4M
t nbdsh -u "$uri" -c - <<'PY'
assert h.can_flush() and h.can_fua() and h.can_zero() and h.can_trim()
assert h.can_cache(), "cache not advertised"
assert h.can_fast_zero(), "fast zero not advertised"
h.pwrite(b"\x11" * 65536, 0, nbd.CMD_FLAG_FUA)
assert h.pread(65536, 0) == b"\x11" * 65536
h.flush()
h.cache(65536, 0)
h.zero(4096, 4096)
assert h.pread(4096, 4096) == bytes(4096)
h.zero(4096, 8192, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(4096, 8192) == bytes(4096)
h.zero(4096, 12288, nbd.CMD_FLAG_FAST_ZERO)
assert h.pread(4096, 12288) == bytes(4096)
h.zero(4096, 16384, nbd.CMD_FLAG_FUA)
h.trim(4096, 20480, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 20480) == bytes(4096)
assert h.pread(4096, 24576) == b"\x11" * 4096
# DF on a read (structured replies are on by default).
assert h.can_df()
chunks = []
def chunk(buf, offset, status, err):
    chunks.append((offset, status, len(buf)))
    return 0
buf = h.pread_structured(4096, 24576, chunk, nbd.CMD_FLAG_DF)
assert buf == b"\x11" * 4096
assert chunks == [(24576, nbd.READ_DATA, 4096)], chunks
h.flush()
PY
