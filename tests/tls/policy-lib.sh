# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Helpers of the TLS policy tests (test-tls-versions.sh,
# test-tls-purpose.sh, test-tls-suites.sh, test-tls-policy-probes.sh),
# sourced after functions.sh.

# only_version DIR VERSION: a GnuTLS system priority file that leaves
# the client only VERSION (tls1.0 ... tls1.3), for libnbd's clients:
#   GNUTLS_SYSTEM_PRIORITY_FILE=DIR/VERSION nbdinfo ...
# Only the client gets the variable, never the server.
only_version ()
{
  local v f="$1/$2"
  echo '[overrides]' > "$f"
  for v in tls1.0 tls1.1 tls1.2 tls1.3; do
    [ "$v" = "$2" ] || echo "disabled-version = $v" >> "$f"
  done
}

# make_policy_certs DIR: besides make-tls-files.sh's, client
# certificates signed by DIR's CA: DIR/client-srvpurpose (extended key
# usage tls_www_server only), DIR/client-noeku (no extended key usage),
# DIR/client-future (valid from 2099).
make_policy_certs ()
{
  local d="$1" name lines
  _policy_cert ()
  {
    local out="$d/$1"; shift
    mkdir -p "$out"
    printf '%s\n' 'organization = "nbdkit tests"' "$@" \
      encryption_key signing_key > "$out/client.info"
    certtool --generate-privkey --key-type=ecdsa \
      --outfile "$out/client-key.pem" 2>/dev/null
    certtool --generate-certificate --load-privkey "$out/client-key.pem" \
      --load-ca-certificate "$d/ca-cert.pem" \
      --load-ca-privkey "$d/ca-key.pem" \
      --template "$out/client.info" --outfile "$out/client-cert.pem" \
      2>/dev/null || fail "certtool could not make $out"
    cp "$d/ca-cert.pem" "$out/"
  }
  _policy_cert client-srvpurpose 'cn = "srvpurpose.test"' tls_www_server \
    'expiration_days = 30'
  _policy_cert client-noeku 'cn = "noeku.test"' 'expiration_days = 30'
  _policy_cert client-future 'cn = "future.test"' tls_www_client \
    'activation_date = "2099-01-01 00:00:00"' \
    'expiration_date = "2099-06-01 00:00:00"'
}

# fill_export URI: write a known 64 KiB pattern at offset 0;
# check_export URI: the export still holds it (a good client after a
# refused one reads intact data from a server that is still alive).
fill_export ()
{
  t nbdsh -c 'h.set_uri_allow_local_file(True)' -c "h.connect_uri('$1')" \
    -c 'h.pwrite(bytes(range(256)) * 256, 0)' ||
    fail "could not write the pattern through $1"
}
check_export ()
{
  kill -0 "$server_pid" 2>/dev/null || fail "the server died"
  t nbdsh -c 'h.set_uri_allow_local_file(True)' -c "h.connect_uri('$1')" \
    -c '
assert h.pread(65536, 0) == bytes(range(256)) * 256, "pattern changed"
' || fail "a good client could not read intact data after: $2"
}
