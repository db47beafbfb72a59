#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin against radosgw, a disk of 1 MiB in objects of 64 KiB.
# What a client writes (nbdsh, nbdcopy) reads back the same; the bucket
# holds exactly the objects the layout names (KEY/%016x, 64 KiB each);
# a 4 KiB write changes exactly one object; trim deletes the whole
# objects of its range and no others, and the map shows them as holes;
# zero rewrites the part of an object it covers.  It would catch wrong
# object names or sizes, a read-modify-write that loses the bytes
# around a partial write, a write that rewrites objects it does not
# touch, a trim that deletes too much or too little, and a map that
# does not match the bucket.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy curl cmp
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket plugin

export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
export AWS_REGION="$S3_REGION"
K=65536
start_server S3 endpoint-url="$S3_ENDPOINT" bucket="$bucket" key=disk \
  size=1M object-size=64K

ref="$tmpdir/ref"
out="$tmpdir/out"
truncate -s 1M "$ref"

check_bytes ()
{
  rm -f "$out"
  t nbdcopy "$uri" "$out" || fail "nbdcopy out failed"
  cmp "$ref" "$out" || fail "$1: the disk differs from the reference"
}
# "offset length hole?" lines of the map, for comparing.
map ()
{
  t nbdinfo --map "$uri" | awk '{ print $1, $2, ($3 % 2) ? "hole" : "data" }'
}
keys ()
{
  s3_keys "$bucket" disk/ | tr '\n' ' '
}

# A new disk is no objects, all zeroes, all hole.
[ -z "$(keys)" ] || fail "a new disk has objects: $(keys)"
check_bytes "new disk"
[ "$(map)" = "0 1048576 hole" ] || fail "new disk map: $(map)"

# 200000 bytes at 100000: objects 1 to 4, partly 1 and 4.
head -c 200000 /dev/urandom > "$tmpdir/data"
dd if="$tmpdir/data" of="$ref" bs=1 seek=100000 conv=notrunc status=none
t nbdsh -u "$uri" -c "
h.pwrite(open('$tmpdir/data', 'rb').read(), 100000)"
check_bytes "after a write across objects"
want="disk/0000000000000001 disk/0000000000000002 disk/0000000000000003 disk/0000000000000004 "
[ "$(keys)" = "$want" ] || fail "objects after the write: $(keys), want $want"
s3_etags "$bucket" disk/ | awk -v k=$K '$3 != k { exit 1 }' ||
  fail "an object is not 64 KiB: $(s3_etags "$bucket" disk/)"
[ "$(map)" = "0 65536 hole
65536 262144 data
327680 720896 hole" ] || fail "map after the write: $(map)"

# 4 KiB inside object 3: exactly that object changes.
s3_etags "$bucket" disk/ > "$tmpdir/before"
head -c 4096 /dev/urandom > "$tmpdir/4k"
dd if="$tmpdir/4k" of="$ref" bs=1 seek=$((3 * K + 1000)) conv=notrunc status=none
t nbdsh -u "$uri" -c "h.pwrite(open('$tmpdir/4k', 'rb').read(), $((3 * K + 1000)))"
s3_etags "$bucket" disk/ > "$tmpdir/after"
changed="$(diff "$tmpdir/before" "$tmpdir/after" | grep '^>' | cut -d' ' -f2)"
[ "$changed" = disk/0000000000000003 ] ||
  fail "a 4 KiB write changed: ${changed:-nothing}, want object 3 alone"
check_bytes "after a 4 KiB write"

# Trim from just before object 2 to just after object 3: 2 and 3 go,
# 1 and 4 stay as they were.
t nbdsh -u "$uri" -c "h.trim($((2 * K + 200)), $((2 * K - 100)))"
want="disk/0000000000000001 disk/0000000000000004 "
[ "$(keys)" = "$want" ] || fail "objects after trim: $(keys), want $want"
dd if=/dev/zero of="$ref" bs=1 seek=$((2 * K)) count=$((2 * K)) \
  conv=notrunc status=none
check_bytes "after trim"
[ "$(map)" = "0 65536 hole
65536 65536 data
131072 131072 hole
262144 65536 data
327680 720896 hole" ] || fail "map after trim: $(map)"

# Zero the last 1000 bytes of object 1 and all of 4: object 1 is
# rewritten, 4 is deleted.
t nbdsh -u "$uri" -c "h.zero($((3 * K + 1000)), $((2 * K - 1000)))"
dd if=/dev/zero of="$ref" bs=1 seek=$((2 * K - 1000)) count=1000 \
  conv=notrunc status=none
dd if=/dev/zero of="$ref" bs=1 seek=$((4 * K)) count=$K \
  conv=notrunc status=none
check_bytes "after zero"
want="disk/0000000000000001 "
[ "$(keys)" = "$want" ] || fail "objects after zero: $(keys), want $want"

# A whole image through nbdcopy, with 4 requests in flight on 2
# connections, and back.
head -c 1M /dev/urandom > "$ref"
t nbdcopy --connections=2 --requests=4 "$ref" "$uri" ||
  fail "nbdcopy in failed"
check_bytes "after nbdcopy in"
[ "$(s3_keys "$bucket" disk/ | wc -l)" = 16 ] ||
  fail "not 16 objects after a full copy: $(keys)"
