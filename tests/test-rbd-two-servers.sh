#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Two rbd servers (and a read-only third) on one image, as
# docs/nbdkit-scale-out.pod describes: a write flushed on one server is
# read by the others; writes alternating between the two writers (the
# image's exclusive lock moving each time) all land, and "rbd export"
# shows the last one of each block.  Would catch: a read cache in a
# server that hides another server's flushed writes, a lost or torn
# write when the lock moves, a read-only server taking the lock.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh cmp
source "$srcdir/rbd-functions.sh"

img=$(new_image two 8M)
declare -A socks
for s in a b c; do
  ro=
  [ $s = c ] && ro=-r
  "$NBDKIT" -f $ro -U "$tmpdir/$s.sock" -P "$tmpdir/$s.pid" \
    rbd "${rbd_args[@]}" image="$img" 9>&- &
  cleanup_fn _kill_pid $!
done
for s in a b c; do
  wait_for 20 -s "$tmpdir/$s.pid" || fail "server $s did not start"
done
export tmpdir
t nbdsh -c '
import os
def conn(s):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=%s/%s.sock" % (os.environ["tmpdir"], s))
    return h
a, b, c = conn("a"), conn("b"), conn("c")
assert c.is_read_only()
# Flushed on a, read on b and c; then the other way.
b.pread(4096, 0); c.pread(4096, 0)      # reads before the write
a.pwrite(b"A" * 4096, 0); a.flush()
assert b.pread(4096, 0) == b"A" * 4096, "b does not see a flushed write of a"
assert c.pread(4096, 0) == b"A" * 4096, "c does not see a flushed write of a"
b.pwrite(b"B" * 4096, 0); b.flush()
assert a.pread(4096, 0) == b"B" * 4096, "a does not see a flushed write of b"
assert c.pread(4096, 0) == b"B" * 4096, "c does not see a flushed write of b"
# Alternating writers: 40 writes over 8 blocks, the lock moving each time.
model = bytearray(8 * 4096)
for i in range(40):
    h, ch = (a, b"a") if i % 2 == 0 else (b, b"b")
    data = ch + bytes([i]) * 4095
    off = 4096 * (i % 8)
    h.pwrite(data, 4096 * 16 + off)
    model[off:off + 4096] = data
a.flush(); b.flush()
for h in (a, b, c):
    assert h.pread(len(model), 4096 * 16) == model, "alternating writes lost"
open(os.environ["tmpdir"] + "/model", "wb").write(bytes(model))
'
rbdc export --no-progress "$RBD_POOL/$img" "$tmpdir/exported" ||
  fail "rbd export failed"
cmp -n $((8 * 4096)) -i $((16 * 4096)):0 "$tmpdir/exported" "$tmpdir/model" ||
  fail "rbd export does not show the alternating writes"
