#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bytes through the S3 plugin's asynchronous reads, on the radosgw of
# the test cluster: 4 MiB of random data written into an 8 MiB disk of
# 64 KiB objects (the rest never written: missing objects), then read
# out with nbdcopy through the async path, through -D nbdkit.async=0,
# and through Debian's nbdkit (its Python plugin) where it is there:
# all the same as the data and zeroes.  Then unaligned reads in flight
# across object boundaries, and one object served read-only (single
# object layout), compared with the file.  It would catch a read
# assembled from the wrong objects or offsets, a missing object not
# read as zeroes, and a single-object read that differs.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy curl cmp
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket async

common=(S3 endpoint-url="$S3_ENDPOINT" region="$S3_REGION"
        access-key="$S3_ACCESS_KEY" secret-key="$S3_SECRET_KEY"
        bucket="$bucket")
many=(key=disk size=8M object-size=64K)

head -c 4M /dev/urandom > "$tmpdir/data"
cp "$tmpdir/data" "$tmpdir/want"
truncate -s 8M "$tmpdir/want"
t "$NBDKIT" -U - "${common[@]}" "${many[@]}" \
  --run "nbdcopy '$tmpdir/data' \"\$uri\"" || fail "nbdcopy in failed"

t "$NBDKIT" -U - "${common[@]}" "${many[@]}" \
  --run "nbdcopy --requests=32 \"\$uri\" '$tmpdir/async'" ||
  fail "nbdcopy out (async) failed"
t "$NBDKIT" -U - -D nbdkit.async=0 "${common[@]}" "${many[@]}" \
  --run "nbdcopy --requests=32 \"\$uri\" '$tmpdir/sync'" ||
  fail "nbdcopy out (sync) failed"
cmp "$tmpdir/want" "$tmpdir/async" || fail "async read differs"
cmp "$tmpdir/sync" "$tmpdir/async" || fail "async and sync reads differ"

if [ -x /usr/bin/nbdkit ] && [ -f "${debian_plugindir:-/nonexistent}/nbdkit-S3-plugin" ] &&
   /usr/bin/python3 -c 'import boto3' 2>/dev/null; then
  AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY" \
  AWS_DEFAULT_REGION="$S3_REGION" \
    t /usr/bin/nbdkit -U - S3 endpoint-url="$S3_ENDPOINT" bucket="$bucket" \
    "${many[@]}" --run "nbdcopy \"\$uri\" '$tmpdir/debian'" ||
    fail "nbdcopy out (Debian's nbdkit) failed"
  cmp "$tmpdir/debian" "$tmpdir/async" || fail "async and Debian's differ"
  echo "Debian's nbdkit reads the same bytes"
else
  echo "Debian's S3 plugin (with boto3) is not there: not compared"
fi

# Unaligned reads in flight, many across object boundaries.
t "$NBDKIT" -U - "${common[@]}" "${many[@]}" --run "nbdsh -u \"\$uri\" -c '
import random
want = open(\"$tmpdir/want\", \"rb\").read()
rnd = random.Random(30)
reqs = []
for i in range(64):
    n = rnd.randrange(1, 200000)
    off = rnd.randrange(0, len(want) - n)
    b = nbd.Buffer(n)
    h.aio_pread(b, off)
    reqs.append((b, off, n))
while h.aio_in_flight() > 0:
    h.poll(-1)
for b, off, n in reqs:
    assert b.to_bytearray() == want[off:off + n], (off, n)
'" || fail "unaligned reads in flight differ"

# One object, read-only.
head -c 1000000 /dev/urandom > "$tmpdir/obj"
s3_put "$bucket" one.img "$tmpdir/obj"
for d in "" "-D nbdkit.async=0"; do
  rm -f "$tmpdir/one"
  t "$NBDKIT" -U - $d "${common[@]}" key=one.img \
    --run "nbdcopy --requests=16 \"\$uri\" '$tmpdir/one'" ||
    fail "nbdcopy of one object ($d) failed"
  cmp "$tmpdir/obj" "$tmpdir/one" || fail "one object ($d) differs"
done
