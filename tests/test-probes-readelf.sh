#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server binary carries a .note.stapsdt entry, provider nbdkit, for
# every probe declared in server/probes.d, and none that is not declared.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf
requires grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"

probes_d="$abs_top_srcdir/server/probes.d"
readelf -n "$server_binary" > "$tmpdir/notes"
awk '/Provider:/ { p = $2 } /Name:/ { print p ":" $2 }' "$tmpdir/notes" |
  sort -u > "$tmpdir/in-binary"
sed -n 's/^[[:space:]]*probe[[:space:]]\{1,\}\([a-z_0-9]*\).*/nbdkit:\1/p' \
  "$probes_d" | sort -u > "$tmpdir/declared"
# A build without GnuTLS has no TLS code, hence no TLS probe sites.
if [ "$("$NBDKIT" --dump-config | grep '^tls=')" = tls=no ]; then
  grep -v '^nbdkit:tls_' "$tmpdir/declared" > "$tmpdir/declared.new"
  mv "$tmpdir/declared.new" "$tmpdir/declared"
fi
echo "in the binary:"; cat "$tmpdir/in-binary"

for p in connection_accept handshake_option handshake_done request_start \
         request_done connection_close; do
  grep -qx "nbdkit:$p" "$tmpdir/in-binary" || fail "no stapsdt note for $p"
done
# Every declared probe is compiled in somewhere, and nothing else is.
diff -u "$tmpdir/declared" "$tmpdir/in-binary" ||
  fail "probes.d and the binary's .note.stapsdt differ"

# Every argument at every site must be readable by every tracer: no
# thread-local (%fs-relative) operands, and no literal immediates, which
# perf drops at one site and not another and then refuses the probe.
if grep -A2 'Provider: nbdkit' "$tmpdir/notes" | grep 'Arguments:' |
     grep -E '%fs|\$'; then
  fail "some probe arguments are not in registers or memory (see above)"
fi
