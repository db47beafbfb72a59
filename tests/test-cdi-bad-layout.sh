#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cdi plugin given OCI layouts that podman would not write: a
# stand-in "podman" on PATH whose "save" writes the layout named by the
# image (the case), so every check of the plugin's layout reader is
# reached.  Each bad layout must stop the server with its reason, never
# crash it or read outside the layout (a digest that climbs out with
# ../ is refused).  A plain (uncompressed) tar layer is served as it
# is, byte for byte.  The real podman is in test-cdi-plugin.sh.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy tar sha256sum gzip
export PATH=/usr/bin:$PATH
mkdir "$tmpdir/bin" "$tmpdir/files"
head -c 100000 /dev/urandom > "$tmpdir/files/disk.img"
tar cf "$tmpdir/plain.tar" -C "$tmpdir/files" disk.img
gzip -c "$tmpdir/plain.tar" | head -c 5000 > "$tmpdir/truncated.gz"

cat > "$tmpdir/bin/podman" <<EOF
#!/bin/bash
# A stand-in for podman: pull succeeds; save -o DIR writes case \$6.
[ "\$1" = pull ] && exit 0
[ "\$1" = save ] || exit 2
dir="\$5" case="\$6"
mkdir -p "\$dir/blobs/sha256"
# blob FILE: store FILE as a blob, print its digest.
blob () {
  local h=\$(sha256sum < "\$1" | cut -c1-64)
  cp "\$1" "\$dir/blobs/sha256/\$h"; echo "sha256:\$h"
}
index () {
  printf '{"manifests":[{"digest":"%s"}]}' "\$1" > "\$dir/index.json"
}
manifest () {
  printf '{"layers":[{"mediaType":"%s","digest":"%s"}]}' "\$1" "\$2" \
    > "\$dir/m.json"
  index "\$(blob "\$dir/m.json")"
}
case "\$case" in
  badjson) printf '{"manifests": [' > "\$dir/index.json" ;;
  climb) index "sha256:../../../../../../../../etc/passwd" ;;
  nodigest) printf '{"manifests":[{"size":1}]}' > "\$dir/index.json" ;;
  big) head -c \$((5 * 1024 * 1024)) /dev/zero > "\$dir/index.json" ;;
  multi) printf '{"manifests":[]}' > "\$dir/m.json"
         index "\$(blob "\$dir/m.json")" ;;
  zstd) manifest application/vnd.oci.image.layer.v1.tar+zstd \
          "\$(blob $tmpdir/plain.tar)" ;;
  truncated) manifest application/vnd.oci.image.layer.v1.tar+gzip \
               "\$(blob $tmpdir/truncated.gz)" ;;
  plain) manifest application/vnd.oci.image.layer.v1.tar \
           "\$(blob $tmpdir/plain.tar)" ;;
esac
EOF
chmod +x "$tmpdir/bin/podman"
export PATH="$tmpdir/bin:$PATH" TMPDIR="$tmpdir"

for c in "badjson:index.json: not valid JSON" \
         "climb:malformed digest \"sha256:\.\./" \
         "nodigest:manifests\[0\]: no \"digest\" string" \
         "big:index.json: not a regular file of at most" \
         "multi:its manifest has no list of layers" \
         "zstd:media type .*zstd: only tar and gzip" \
         "truncated:the layer does not uncompress"; do
  name="${c%%:*}" regex="${c#*:}"
  if t "$NBDKIT" -U - cdi "$name" --run true > "$tmpdir/out" 2>&1; then
    fail "the server started with layout $name"
  fi
  grep -Eq "$regex" "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "layout $name: no error matching $regex"; }
done

t "$NBDKIT" -U - cdi plain --run "nbdcopy \"\$uri\" $tmpdir/got.tar" ||
  fail "the plain tar layer was not served"
cmp "$tmpdir/plain.tar" "$tmpdir/got.tar" ||
  fail "the plain tar layer read back differs"

leftover=$(find "$tmpdir" -maxdepth 1 -name 'nbdkit-cdi-*')
[ -z "$leftover" ] || fail "private directories left behind: $leftover"
