#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# qemu-img convert into and out of an S3 disk on radosgw: a qcow2 image
# with data and holes goes in (qemu's unaligned and zero requests,
# several in flight), comes back out as raw, and qemu-img compare finds
# them equal; the holes of the image are holes (missing objects) in the
# bucket.  It would catch wrong bytes under qemu's request pattern and
# zero requests that store objects of zeroes.
source "$(dirname "$0")/functions.sh"
requires_cmd qemu-img qemu-io curl
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket qemu

export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
export AWS_REGION="$S3_REGION"
start_server S3 endpoint-url="$S3_ENDPOINT" bucket="$bucket" key=vm \
  size=4M object-size=256K

# 4 MiB: a pattern at 0 (300 KiB, so objects 0 and 1), another from
# 2 MiB + 100 KiB (object 8), nothing in between or after.
img="$tmpdir/in.qcow2"
qemu-img create -q -f qcow2 "$img" 4M
qemu-io -f qcow2 -c 'write -P 0x55 0 300k' \
  -c 'write -P 0xaa 2148k 100k' "$img" > /dev/null

t qemu-img convert -n -f qcow2 -O raw "$img" "$uri" ||
  fail "qemu-img convert in failed"
want="vm/0000000000000000 vm/0000000000000001 vm/0000000000000008 "
got="$(s3_keys "$bucket" vm/ | tr '\n' ' ')"
[ "$got" = "$want" ] || fail "objects after convert in: $got, want $want"

t qemu-img convert -f raw -O raw "$uri" "$tmpdir/out.raw" ||
  fail "qemu-img convert out failed"
qemu-img compare -q -f qcow2 -F raw "$img" "$tmpdir/out.raw" ||
  fail "the image read back differs"
# And qemu-img compares it through the server directly.
t qemu-img compare -q -f qcow2 -F raw "$img" "$uri" ||
  fail "qemu-img compare with the served disk failed"
