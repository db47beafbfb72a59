#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cdi plugin's probes (bpftrace), with an image of two layers
# (disk.img under /disk/, then other.bin under /other/) pushed to a
# private docker-registry on 127.0.0.1 (tests/cdi-registry.sh) and
# served with layer=1.  cdi_pull: the image, exit status 0; cdi_layer:
# layer 1 of 2, a sha256 digest that names a gzip blob in the registry
# whose tar holds other/other.bin, the gzip media type, and a size
# equal to that tar's and to the export's.  A pull of an image that
# does not exist fires cdi_pull with podman's non-zero status and no
# cdi_layer.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdinfo
source "$(dirname "$0")/cdi-registry.sh"

head -c 1048576 /dev/urandom > "$tmpdir/ctx/disk.img"
head -c 70000 /dev/urandom > "$tmpdir/ctx/other.bin"
push_image vm/two:1 'ADD disk.img /disk/' 'ADD other.bin /other/'

cat > "$tmpdir/trace.bt" <<BT
usdt:$cdi_so:nbdkit:cdi_pull {
  printf("%llu pull %s %d\n", nsecs, str(arg0), arg1); }
usdt:$cdi_so:nbdkit:cdi_layer {
  printf("%llu layer %s %d %d %s %s %d\n", nsecs, str(arg0), arg1, arg2,
         str(arg3), str(arg4), arg5); }
BT
# A digest is 71 characters, more than bpftrace's default of 64.
BPFTRACE_STRLEN=96 start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" \
  "$tmpdir/trace.bt"

t "$NBDKIT" -U - cdi "$registry/vm/two:1" layer=1 \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size" ||
  fail "the server or nbdinfo failed"
t "$NBDKIT" -U - cdi "$registry/vm/nope:1" --run true 2>/dev/null &&
  fail "the server started with an image that does not exist"
sleep 0.5
interrupt_tracer "$bt"
trace_in_order "$tmpdir/trace" > "$tmpdir/events"
cat "$tmpdir/events"

grep -qx "pull $registry/vm/two:1 0" "$tmpdir/events" ||
  fail "no cdi_pull with status 0 for the image"
grep -Eqx "pull $registry/vm/nope:1 [1-9][0-9]*" "$tmpdir/events" ||
  fail "no cdi_pull with a non-zero status for the missing image"
[ "$(grep -c '^layer ' "$tmpdir/events")" -eq 1 ] ||
  fail "not exactly one cdi_layer"
read -r _ img layer layers digest mtype size \
  < <(grep '^layer ' "$tmpdir/events")
[ "$img $layer $layers" = "$registry/vm/two:1 1 2" ] ||
  fail "cdi_layer: not layer 1 of 2 of the image"
[ "$mtype" = application/vnd.oci.image.layer.v1.tar+gzip ] ||
  fail "cdi_layer: media type $mtype"
hex="${digest#sha256:}"
blob="$tmpdir/reg/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
[ -f "$blob" ] || fail "the digest $digest names no blob in the registry"
gzip -dc "$blob" > "$tmpdir/layer.tar" || fail "the blob is not gzip"
tar tf "$tmpdir/layer.tar" | grep -qx other/other.bin ||
  fail "the chosen layer does not hold other/other.bin"
tar_size=$(stat -c %s "$tmpdir/layer.tar")
[ "$size" = "$tar_size" ] && [ "$(cat "$tmpdir/size")" = "$tar_size" ] ||
  fail "sizes: probe $size, export $(cat "$tmpdir/size"), layer $tar_size"
