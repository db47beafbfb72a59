#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cdi plugin against podman and a private docker-registry on
# 127.0.0.1 (tests/cdi-registry.sh): a containerDisk image (FROM
# scratch, ADD disk.img /disk/) is pushed, removed locally, and served
# by the plugin, which pulls it.  Checked: nbdcopy through the tar
# filter reads bytes equal to disk.img; the raw export is the layer, a
# tar with disk/disk.img in it; writes are refused (EPERM); the server
# refuses to start, saying why, for an image that does not exist, an
# image with no layers, and a layer number past the last; no private
# directory is left in $TMPDIR.
# No comparison with Debian's cdi plugin (nbdkit 1.32.5): it looks for
# manifest.json in what "podman save --format oci-dir" writes, and
# podman 4.3 (Debian 12) writes index.json, so it fails on every image
# ("cannot open .../manifest.json").
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh tar
source "$(dirname "$0")/cdi-registry.sh"

# A raw disk of 3 MiB + 4 KiB of random bytes (not a multiple of the
# tar block size, so the tar filter's bounds are exercised too).
head -c $(( 3 * 1024 * 1024 + 4096 )) /dev/urandom > "$tmpdir/ctx/disk.img"
push_image vm/disk:1 'ADD disk.img /disk/'
push_image vm/empty:1 'LABEL purpose=no-layers'

t "$NBDKIT" -U - cdi "$registry/vm/disk:1" \
  --filter=tar tar-entry=disk/disk.img \
  --run "nbdcopy \"\$uri\" $tmpdir/got.img" ||
  fail "nbdcopy through the tar filter failed"
cmp "$tmpdir/ctx/disk.img" "$tmpdir/got.img" ||
  fail "the disk read back differs from disk.img"

# The raw export: the layer's tar, and it is read-only.  image= is the
# other spelling of the image parameter.
t "$NBDKIT" -U - cdi image="$registry/vm/disk:1" layer=0 \
  --run "nbdcopy \"\$uri\" $tmpdir/layer.tar && nbdsh -u \"\$uri\" -c '
assert h.is_read_only()
h.set_strict_mode(0)
try:
    h.pwrite(b\"x\" * 512, 0)
    raise Exception(\"the write succeeded\")
except nbd.Error as e:
    assert e.errno == \"EPERM\", e.errno
'" || fail "reading the layer, or the read-only check, failed"
tar tf "$tmpdir/layer.tar" > "$tmpdir/list" || fail "the layer is not a tar"
grep -qx 'disk/disk.img' "$tmpdir/list" ||
  { cat "$tmpdir/list"; fail "no disk/disk.img in the layer"; }

# expect_refusal REGEX ARGS...: the server must not start, and its
# error output must match REGEX.
expect_refusal ()
{
  local regex="$1"
  shift
  if t "$NBDKIT" -U - cdi "$@" --run true > "$tmpdir/out" 2>&1; then
    fail "the server started: cdi $*"
  fi
  grep -Eq "$regex" "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "cdi $*: no error matching $regex"; }
}
expect_refusal \
  "podman pull $registry/vm/nope:1 failed \(exit status [0-9]+\): .*unknown" \
  "$registry/vm/nope:1"
expect_refusal "image $registry/vm/empty:1 has no layers, so no disk" \
  "$registry/vm/empty:1"
expect_refusal \
  "image $registry/vm/disk:1 has 1 layer\(s\): layer=1 does not exist" \
  "$registry/vm/disk:1" layer=1
expect_refusal "the image name is required" layer=0

leftover=$(find "$tmpdir" -maxdepth 1 -name 'nbdkit-cdi-*')
[ -z "$leftover" ] || fail "private directories left behind: $leftover"
