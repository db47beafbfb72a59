#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin against a real Ceph cluster: bytes written through the
# plugin are what "rbd export" reads from the cluster, an image made by
# "rbd import" reads back through the plugin byte for byte, and
# qemu-img convert copies in and out through it.  Two connections to
# the same image see each other's flushed writes (multi-conn).  Would
# catch: wrong offsets or lengths passed to librbd, a write that never
# reaches the OSD, a FUA not honoured, a size from the wrong image, a
# per-connection cache that makes multi-conn unsafe.  (Debian's nbdkit
# has no rbd plugin to compare with.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy qemu-img cmp
source "$srcdir/rbd-functions.sh"

# An image made outside the plugin: random data with a hole, 9 MiB +
# 512 bytes, so it spans three 4 MiB objects and ends mid-object.
src="$tmpdir/src.img"
head -c 3M /dev/urandom > "$src"
truncate -s 6M "$src"
head -c 3M /dev/urandom >> "$src"
head -c 512 /dev/urandom >> "$src"
imp=$(new_image import 1M)
rbdc rm --no-progress "$RBD_POOL/$imp" >/dev/null 2>&1
rbdc import --no-progress "$src" "$RBD_POOL/$imp" || fail "rbd import failed"

# Read it through the plugin: size and bytes.
start_server rbd "${rbd_args[@]}" image="$imp"
size=$(t nbdinfo --size "$uri")
[ "$size" = "$(stat -c %s "$src")" ] || fail "size $size, want $(stat -c %s "$src")"
t nbdcopy "$uri" "$tmpdir/out.img"
cmp "$src" "$tmpdir/out.img" || fail "nbdcopy out of the plugin differs from the imported file"
t qemu-img convert -f raw -O raw "$uri" "$tmpdir/out2.img"
cmp "$src" "$tmpdir/out2.img" || fail "qemu-img convert out of the plugin differs"
stop_server

# Write through the plugin, at the edges of objects, with and without
# FUA; then the cluster's copy must match a local model.
img=$(new_image rw 16M)
truncate -s 16M "$tmpdir/model"
start_server rbd "${rbd_args[@]}" "$img"
export tmpdir uri
t nbdsh -u "$uri" -c '
import os
model = open(os.environ["tmpdir"] + "/model", "r+b")
def w(off, data, flags=0):
    h.pwrite(data, off, flags)
    model.seek(off); model.write(data)
w(0, b"A" * 512)
w(4 * 1024 * 1024 - 100, os.urandom(200))            # across objects 0/1
w(5 * 1024 * 1024, os.urandom(1024 * 1024), nbd.CMD_FLAG_FUA)
w(16 * 1024 * 1024 - 4096, b"Z" * 4096)              # the last block
assert h.pread(200, 4 * 1024 * 1024 - 100) == \
    (model.seek(4 * 1024 * 1024 - 100), model.read(200))[1]
h.flush()
model.close()
# Two connections: a flushed write on one is read by the other.
assert h.can_multi_conn()
h2 = nbd.NBD()
h2.connect_uri(os.environ["uri"])
h.pwrite(b"multi-conn" * 100, 9 * 1024 * 1024)
h.flush()
assert h2.pread(1000, 9 * 1024 * 1024) == b"multi-conn" * 100
h2.shutdown()
' || fail "nbdsh writes failed"
stop_server
printf 'multi-conn%.0s' $(seq 100) |
  dd of="$tmpdir/model" bs=1 seek=$((9 * 1024 * 1024)) conv=notrunc 2>/dev/null
rbdc export --no-progress "$RBD_POOL/$img" "$tmpdir/exported" || fail "rbd export failed"
cmp "$tmpdir/model" "$tmpdir/exported" ||
  fail "rbd export does not show the bytes written through the plugin"

# qemu-img convert into the plugin (a new image), read back by rbd.
img2=$(new_image qemu 10M)
start_server rbd "${rbd_args[@]}" image="$img2"
t qemu-img convert -n -f raw -O raw "$src" "$uri" || fail "qemu-img convert into the plugin failed"
stop_server
rbdc export --no-progress "$RBD_POOL/$img2" "$tmpdir/exported2" || fail "rbd export failed"
truncate -s 10M "$src"
cmp "$src" "$tmpdir/exported2" || fail "qemu-img convert into the plugin: rbd export differs"
