#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --tls-psk with --tls-verify-peer or --tls-certificates is accepted,
# as nbdkit 1.32 accepts it, and PSK wins: nbdkit(1) and nbdkit-tls(1)
# say --tls-psk "overrides X.509 certificate authentication".  So a
# PSK client is served, an X.509 client (even one with a certificate
# the CA signed) is refused, and --tls-verify-peer asks nothing of PSK
# clients.  Real psktool keys and nbdinfo; each command also runs
# under Debian's nbdkit, which must print the same.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo psktool certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
cd "$tmpdir/tls"
# Fresh keys from psktool, as a user would make them.
psktool -u alice -p keys2.psk >/dev/null

run='nbdinfo --size "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file=keys2.psk" ||
    echo psk-refused
  nbdinfo --size "nbds+unix:///?socket=$unixsocket&tls-certificates=client" \
    2>/dev/null || echo x509-refused
  nbdinfo --size "nbd+unix:///?socket=$unixsocket" 2>/dev/null ||
    echo plain-refused'
same ()
{
  local want="$1" server st
  shift
  for server in "$NBDKIT" /usr/bin/nbdkit; do
    [ -x "$server" ] || continue
    "$server" -U - "$@" null size=1M --run "$run" \
      > "$tmpdir/out" 2> "$tmpdir/err" ||
      { st=$?; cat "$tmpdir/err"; fail "$server $*: exit status $st"; }
    cat "$tmpdir/err"
    if [ "$(tr '\n' ' ' < "$tmpdir/out")" != "$want" ]; then
      cat "$tmpdir/out"
      fail "$server $*: printed the above, not: $want"
    fi
  done
}

# The issue's repro: PSK TLS served under --tls-verify-peer.
for server in "$NBDKIT" /usr/bin/nbdkit; do
  [ -x "$server" ] || continue
  [ "$(t "$server" -U - --tls=require --tls-verify-peer --tls-psk=keys2.psk \
         null size=1M --run 'nbdinfo --size "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file=keys2.psk"')" = 1048576 ] ||
    fail "$server: --tls-verify-peer with --tls-psk did not serve PSK TLS"
done

req="1048576 x509-refused plain-refused "
same "$req" --tls=require --tls-verify-peer --tls-psk=keys2.psk
same "$req" --tls=require --tls-certificates=server --tls-psk=keys2.psk
same "$req" --tls=require --tls-certificates=server --tls-verify-peer \
  --tls-psk=keys2.psk
# --tls=on: plain clients too, still no X.509.
same "1048576 x509-refused 1048576 " --tls=on --tls-certificates=server \
  --tls-psk=keys2.psk

# The captive $uri under --tls=require names the PSK, not the
# certificates, and works as it is.
t "$NBDKIT" -U - --tls=require --tls-certificates=server \
  --tls-psk=keys2.psk null size=1M \
  --run 'echo "$uri"; nbdinfo --size "$uri"' > "$tmpdir/uri"
cat "$tmpdir/uri"
grep -q '^nbds+unix://alice@/?socket=.*&tls-psk-file=.*keys2\.psk$' \
  "$tmpdir/uri" || fail "\$uri does not name the PSK file"
grep -qx 1048576 "$tmpdir/uri" || fail "\$uri did not serve"
