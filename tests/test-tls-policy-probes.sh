#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every refusal of the TLS policy fires tls_handshake_done with ok=0
# and its reason, under bpftrace; after each the server is alive and a
# good client reads intact data.  PSK: TLS 1.0-only and TLS 1.1-only
# clients (nbdinfo), a wrong key and an unknown identity, and clients
# offering only NULL, RC4, 3DES or anonymous suites
# (tls-priority-client).  X.509 under --tls-verify-peer: the same
# versions and suites, and client certificates that are for servers
# only, not yet valid or expired (the refused DN in the probe's peer),
# or from another CA (the client then sends none).  Would catch a refusal without its probe, a
# reason lost (a bare "Error in the certificate verification."), or a
# server that falls over after a refusal.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/policy-lib.sh"
requires_cmd bpftrace nbdinfo nbdsh psktool certtool
requires test -x "$abs_builddir/tls-priority-client"
requires_root
requires_probes
assert_tls_build
tracing_lock

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
make_policy_certs "$d"
psktool -u bob -p "$tmpdir/bob.psk" >/dev/null
for v in tls1.0 tls1.1; do only_version "$tmpdir" "$v"; done
client="$abs_builddir/tls-priority-client"
hexkey="$(sed -n 's/^alice://p' "$d/keys.psk")"
tls12='NORMAL:-VERS-TLS1.3'

out="$tmpdir/out"
cat > "$tmpdir/trace.bt" <<BT
usdt:$server_binary:nbdkit:tls_handshake_done {
  printf("done %d %d %s|%s\n", arg0, arg1, str(arg2), str(arg3));
}
BT
start_bpftrace 100 "$out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

failures () { grep -c '^done [0-9]* 0 ' "$out" || :; }

# refused WHAT REGEX CMD...: CMD fails; one more ok=0 probe fires and
# its "detail|peer" matches REGEX; the server still serves intact data.
refused ()
{
  local what="$1" re="$2" n
  shift 2
  n="$(failures)"
  if t "$@" >/dev/null 2>"$tmpdir/err"; then
    fail "$kind: $what was served"
  fi
  wait_for_output "$out" "^done [0-9]+ 0 " "$bt" 1 # at least one
  for (( i = 0; i < 100; i++ )); do
    [ "$(failures)" -gt "$n" ] && break
    sleep 0.1
  done
  [ "$(failures)" = $((n + 1)) ] ||
    { cat "$out"; fail "$kind: $what: no single tls_handshake_done ok=0"; }
  grep '^done [0-9]* 0 ' "$out" | tail -n1 > "$tmpdir/last"
  echo "$kind: $what: $(cat "$tmpdir/last")"
  grep -Eq "^done [0-9]+ 0 $re" "$tmpdir/last" ||
    fail "$kind: $what: the probe does not say /$re/"
  check_export "$good" "$kind $what"
}

version='A packet with illegal or unsupported version was received\.\|$'
suite='No supported cipher suites have been found\.\|$'
for kind in psk x509; do
  if [ "$kind" = psk ]; then
    start_server --tls=require --tls-psk="$d/keys.psk" memory 1M
    good="nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk"
    creds=(psk alice "$hexkey")
    kx=':+ECDHE-PSK:+DHE-PSK:+PSK'
  else
    start_server --tls=require --tls-certificates="$d/server" \
      --tls-verify-peer memory 1M
    good="nbds+unix:///?socket=$sock&tls-certificates=$d/client"
    creds=(x509 "$d/client")
    kx=
  fi
  fill_export "$good"
  for v in tls1.0 tls1.1; do
    refused "a $v-only client" "$version" \
      env GNUTLS_SYSTEM_PRIORITY_FILE="$tmpdir/$v" nbdinfo --size "$good"
  done
  for weak in NULL ARCFOUR-128 3DES-CBC; do
    refused "a $weak-only client" "$suite" \
      "$client" "$sock" "$tls12:-CIPHER-ALL:+$weak$kx" "${creds[@]}"
  done
  refused "an anonymous-only client" "$suite" \
    "$client" "$sock" "$tls12:-KX-ALL:+ANON-ECDH:+ANON-DH" anon
  if [ "$kind" = psk ]; then
    refused "the wrong key" 'An illegal parameter has been received\.\|$' \
      nbdinfo --size "nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/wrong.psk"
    refused "an unknown identity" 'Error in password/key file\.\|$' \
      nbdinfo --size "nbds+unix://bob@/?socket=$sock&tls-psk-file=$tmpdir/bob.psk"
  else
    x509_uri () { echo "nbds+unix:///?socket=$sock&tls-certificates=$d/$1"; }
    refused "a server-purpose certificate" \
      "client certificate not for TLS clients\|CN=srvpurpose\.test,O=nbdkit tests$" \
      nbdinfo --size "$(x509_uri client-srvpurpose)"
    refused "a not yet valid certificate" \
      "client certificate not yet valid\|CN=future\.test,O=nbdkit tests$" \
      nbdinfo --size "$(x509_uri client-future)"
    refused "an expired certificate" \
      "client certificate expired\|CN=expired\.test,O=nbdkit tests$" \
      nbdinfo --size "$(x509_uri client-expired)"
    # GnuTLS's client sends no certificate the server's CA list does
    # not name, so the server sees none.
    refused "a certificate from another CA" 'Certificate is required\.\|$' \
      nbdinfo --size "$(x509_uri client-rogue)"
  fi
  stop_server
done
interrupt_tracer "$bt"
cat "$out"
# Every good client was secured (ok=1) and nothing else failed.
[ "$(grep -c '^done [0-9]* 0 ' "$out")" = $(( 6 + 2 + 6 + 4 )) ] ||
  fail "unexpected number of refusals"
