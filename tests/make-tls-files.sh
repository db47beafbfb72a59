#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/make-tls-files.sh DIR: make the TLS files the TLS tests use,
# with certtool and psktool (gnutls-bin).  ECDSA keys keep it quick.
#
#   DIR/server/          ca-cert.pem server-cert.pem server-key.pem
#   DIR/client/          ca-cert.pem client-cert.pem client-key.pem
#                        (a client the server's CA signed)
#   DIR/client-other/    another client of that CA (CN other.test)
#   DIR/client-nocert/   ca-cert.pem only
#   DIR/client-rogue/    a client certificate from another CA
#   DIR/client-expired/  a client certificate that expired in 2020
#   DIR/server-expired/  a server certificate that expired in 2020
#   DIR/server-rogue/    a server certificate from another CA
#   DIR/keys.psk         PSK user "alice"
#   DIR/wrong.psk        user "alice" with a different key
set -euo pipefail

dir=$1
mkdir -p "$dir"
cd "$dir"

key () { certtool --generate-privkey --key-type=ecdsa --outfile "$1" 2>/dev/null; }

ca () {                         # ca NAME
  cat > "$1.info" <<EOF
cn = "$1"
ca
cert_signing_key
expiration_days = 30
EOF
  key "$1-key.pem"
  certtool --generate-self-signed --load-privkey "$1-key.pem" \
    --template "$1.info" --outfile "$1-cert.pem" 2>/dev/null
}

# sign CA KIND(server|client) CN OUTDIR [expired]
sign () {
  local ca=$1 kind=$2 cn=$3 out=$4 expired=${5:-}
  mkdir -p "$out"
  {
    echo "organization = \"nbdkit tests\""
    echo "cn = \"$cn\""
    if [ "$kind" = server ]; then
      echo 'dns_name = "localhost"'
      echo 'ip_address = "127.0.0.1"'
      echo tls_www_server
    else
      echo tls_www_client
    fi
    echo encryption_key
    echo signing_key
    if [ -n "$expired" ]; then
      echo 'activation_date = "2020-01-01 00:00:00"'
      echo 'expiration_date = "2020-06-01 00:00:00"'
    else
      echo 'expiration_days = 30'
    fi
  } > "$out/$kind.info"
  key "$out/$kind-key.pem"
  certtool --generate-certificate --load-privkey "$out/$kind-key.pem" \
    --load-ca-certificate "$ca-cert.pem" --load-ca-privkey "$ca-key.pem" \
    --template "$out/$kind.info" --outfile "$out/$kind-cert.pem" 2>/dev/null
  rm "$out/$kind.info"
  # Both sides trust the real CA.
  cp ca-cert.pem "$out/ca-cert.pem"
}

ca ca
ca rogue
sign ca server localhost server
sign ca client client.test client
sign ca client other.test client-other
sign rogue client rogue.test client-rogue
sign ca client expired.test client-expired expired
sign ca server localhost server-expired expired
sign rogue server localhost server-rogue
mkdir -p client-nocert
cp ca-cert.pem client-nocert/

psktool -u alice -p keys.psk >/dev/null
psktool -u alice -p wrong.psk >/dev/null
