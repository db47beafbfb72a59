#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A 64 GiB S3 disk in 64 KiB objects (a million of them) with three
# objects written: block status answers from listings of the objects
# that exist, so the whole map is four extents, at once; a zero over
# a large range deletes the objects in it without visiting the
# millions of missing ones.  It would catch a map that stops at the
# first 1000 objects of a request, or a zero or trim that lists or
# deletes object by object (the test has a time limit).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo curl
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket sparse

export AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY"
export AWS_REGION="$S3_REGION"
start_server S3 endpoint-url="$S3_ENDPOINT" bucket="$bucket" key=big \
  size=64G object-size=64K

map ()
{
  timeout 20 nbdinfo --map "$uri" |
    awk '{ print $1, $2, ($3 % 2) ? "hole" : "data" }'
}
# Objects 0 and 1, and the object at 32 GiB.
timeout 20 nbdsh -u "$uri" -c '
h.pwrite(b"y" * 70000, 1000)
h.pwrite(b"z" * 65536, 2**35)
'
[ "$(map)" = "0 131072 data
131072 34359607296 hole
34359738368 65536 data
34359803904 34359672832 hole" ] || fail "map of the 64 GiB disk: $(map)"

# Zero 1 GiB around the object at 32 GiB (the server may split it):
# that object goes, the others stay.
timeout 20 nbdsh -u "$uri" -c 'h.zero(2**30, 2**35 - 2**29)' ||
  fail "zeroing 1 GiB failed or took too long"
[ "$(s3_keys "$bucket" big/ | tr '\n' ' ')" = \
  "big/0000000000000000 big/0000000000000001 " ] ||
  fail "objects after zero: $(s3_keys "$bucket" big/)"
[ "$(map)" = "0 131072 data
131072 68719345664 hole" ] || fail "map after zero: $(map)"
