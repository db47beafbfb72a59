#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS with a pre-shared key (--tls-psk, psktool's file format), through
# real clients: the captive $uri and $tls, nbdinfo and nbdsh writing
# and reading back bytes over TLS, the PSK username seen by the plugin,
# and a client with the wrong key refused while the server goes on
# serving the right one.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh psktool certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
psk="$tmpdir/tls/keys.psk"

# Captive mode: $tls says TLS is required, the URI is nbds+unix with
# the PSK user and file, and nbdinfo can use it as it is.
t "$NBDKIT" -U - --tls=require --tls-psk="$psk" memory 1M \
  --run 'echo "tls=$tls"; echo "uri=$uri"; nbdinfo "$uri"' > "$tmpdir/out"
cat "$tmpdir/out"
grep -qx 'tls=2' "$tmpdir/out" || fail "\$tls is not 2 under --tls=require"
grep -Eq '^uri=nbds\+unix://alice@/\?socket=.*&tls-psk-file=.*keys\.psk$' \
  "$tmpdir/out" || fail "captive \$uri is not an nbds+unix URI with the PSK"
grep -q 'with TLS' "$tmpdir/out" || fail "nbdinfo did not negotiate TLS"

# A PSK username with characters a URI's userinfo cannot hold as they
# are ("/" would end the authority) is percent-encoded, and libnbd
# decodes it back into the user the key file names.
printf 'team/ops+1:%s\n' "$(sed -n '1s/^[^:]*://p' "$psk")" > "$tmpdir/odd.psk"
t "$NBDKIT" -U - --tls=require --tls-psk="$tmpdir/odd.psk" memory 1M \
  --run 'echo "uri=$uri"; nbdinfo "$uri"' > "$tmpdir/odd"
cat "$tmpdir/odd"
grep -q '^uri=nbds+unix://team%2Fops%2B1@/?socket=' "$tmpdir/odd" ||
  fail "the PSK username is not percent-encoded in the captive \$uri"
grep -q 'with TLS' "$tmpdir/odd" || fail "nbdinfo could not use the encoded URI"

start_server --tls=require --tls-psk="$psk" memory 16M
good="nbds+unix://alice@/?socket=$sock&tls-psk-file=$psk"
bad="nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/tls/wrong.psk"

# Bytes written over TLS read back over another TLS connection; 1 MiB
# crosses many TLS records.
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$good')
assert h.get_tls_negotiated()
buf = bytes(range(256)) * 4096
h.pwrite(buf, 65536)
h.flush()
"
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$good')
assert h.pread(1048576, 65536) == bytes(range(256)) * 4096
assert h.pread(4096, 0) == bytes(4096)
"

# The wrong key: refused, and the server still serves the right one.
for i in 1 2 3; do
  if t nbdinfo "$bad" >"$tmpdir/bad.out" 2>&1; then
    fail "a client with the wrong PSK was served"
  fi
done
cat "$tmpdir/bad.out"
kill -0 "$server_pid" || fail "server died after a wrong PSK"
[ "$(t nbdinfo --size "$good")" = 16777216 ] ||
  fail "good client not served after wrong PSKs"
stop_server

# The plugin sees the PSK identity.
start_server --tls=require --tls-psk="$psk" \
  "$abs_builddir/.libs/tls-info-plugin.so"
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix://alice@/secure?socket=$sock&tls-psk-file=$psk')
line = h.pread(64, 0).split(b'\n')[0]
print(line)
assert line == b'tls=1 dn= issuer= user=alice', line
"
