#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --tls-verify-peer and what a client certificate is for (nbdinfo and
# nbdsh with certificates from certtool; test-tls-x509.sh covers no
# certificate, another CA and an expired one):
#  - a certificate from the right CA whose extended key usage is only
#    tls_www_server (a server's) is refused: would catch the server
#    verifying without the TLS client purpose, as it once did;
#  - a certificate with no extended key usage is accepted (X.509: no
#    extension means any purpose);
#  - a certificate not valid until 2099 is refused;
# the server logs why, and a good client then reads intact data.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/policy-lib.sh"
requires_cmd nbdinfo nbdsh certtool psktool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
make_policy_certs "$d"
log="$tmpdir/log"
uri_for () { echo "nbds+unix:///?socket=$sock&tls-certificates=$d/$1"; }

start_server -v --tls=require --tls-certificates="$d/server" \
  --tls-verify-peer memory 1M 2>"$log"
good="$(uri_for client)"
fill_export "$good"

# refused DIR REASON: nbdinfo with DIR's certificate fails, the server
# logs REASON and the certificate's DN, and the export is intact.
refused ()
{
  if t nbdinfo --size "$(uri_for "$1")" 2>"$tmpdir/err"; then
    fail "$1 was served under --tls-verify-peer"
  fi
  cat "$tmpdir/err"
  grep "failed: " "$log" | tail -n1 > "$tmpdir/why"
  cat "$tmpdir/why"
  grep -q "failed: client certificate $2, peer CN=$3" \
    "$tmpdir/why" || fail "$1: the server did not log \"$2\" for $3"
  check_export "$good" "$1"
  rm "$tmpdir/why"
}
refused client-srvpurpose 'not for TLS clients' srvpurpose.test
refused client-future 'not yet valid' future.test

[ "$(t nbdinfo --size "$(uri_for client-noeku)")" = 1048576 ] ||
  fail "a client certificate without extended key usage was refused"
grep -q 'secured: .* peer "CN=noeku.test,O=nbdkit tests"' "$log" ||
  fail "the certificate without extended key usage was not the peer"
