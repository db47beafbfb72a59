#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bytes written through a plugin that completes its requests later,
# from a thread of its own (nbdkit-async(3): the example-async plugin),
# read back the same: with structured replies and with simple ones,
# small and large (the large reads and writes hold the connection's
# payload budget), with FUA, flush, trim and zero; and a disk image
# copied in and out with qemu-img and nbdcopy, many requests at a time.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires_cmd qemu-img
requires_cmd nbdcopy

cat > "$tmpdir/rw.py" <<'PY'
import nbd, os, sys
for structured in (True, False):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    h.connect_uri(sys.argv[1])
    assert h.get_structured_replies_negotiated() == structured
    small = b"hello" * 1000
    h.pwrite(small, 4096)
    assert h.pread(len(small), 4096) == small
    big = os.urandom(6 * 1024 * 1024)          # over the kept buffer
    h.pwrite(big, 8 * 1024 * 1024, nbd.CMD_FLAG_FUA)
    assert h.pread(len(big), 8 * 1024 * 1024) == big
    h.flush()
    h.trim(4096, 4096)
    assert h.pread(4096, 4096) == bytes(4096)
    h.pwrite(b"x" * 8192, 65536)
    h.zero(4096, 65536 + 1024)
    assert h.pread(8192, 65536) == b"x" * 1024 + bytes(4096) + b"x" * 3072
    h.zero(4096, 65536, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
    assert h.pread(4096, 65536) == bytes(4096)
    # Many at once: each reply must carry its own request's data.
    bufs = []
    for i in range(200):
        h.aio_pwrite(bytes([i % 251]) * 4096, 1024 * 1024 + i * 4096)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for i in range(200):
        b = nbd.Buffer(4096)
        h.aio_pread(b, 1024 * 1024 + i * 4096)
        bufs.append((i, b))
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for i, b in bufs:
        assert b.to_bytearray() == bytes([i % 251]) * 4096, i
    h.shutdown()
print("ok")
PY

t "$NBDKIT" -U - example-async size=32M delay=5 \
  --run 'python3 "'"$tmpdir"'/rw.py" "$uri"' > "$tmpdir/out" 2>&1 ||
  { cat "$tmpdir/out"; fail "write and read back"; }
grep -q '^ok$' "$tmpdir/out" || { cat "$tmpdir/out"; fail "no ok"; }

# A disk image in and out: qemu-img keeps several requests in flight,
# nbdcopy many.
head -c 8M /dev/urandom > "$tmpdir/in.img"
t "$NBDKIT" -U - example-async size=8M delay=1 --run '
  qemu-img convert -n -f raw -O raw "'"$tmpdir"'/in.img" "$uri" &&
  nbdcopy --requests=64 "$uri" "'"$tmpdir"'/out1.img" &&
  qemu-img convert -f raw -O raw "$uri" "'"$tmpdir"'/out2.img"' ||
  fail "qemu-img or nbdcopy failed"
cmp "$tmpdir/in.img" "$tmpdir/out1.img" || fail "nbdcopy read other bytes"
cmp "$tmpdir/in.img" "$tmpdir/out2.img" || fail "qemu-img read other bytes"
