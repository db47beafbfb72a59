#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Cipher suites, with PSK and with X.509 (tls-priority-client offers
# exactly what a priority string says):
#  - a client offering only NULL, only RC4, only 3DES, or only
#    anonymous (DH-anon, ECDH-anon) suites is refused, and a good
#    client then reads intact data;
#  - TLS 1.2 AES-CBC stays on (a fallback for a client with nothing
#    better; see nbdkit-tls(1)), and a ChaCha20-only client is served;
#  - where the CPU has AES-NI, a client that lists ChaCha20 before
#    AES-GCM gets AES-GCM (the server's order), which would catch the
#    server precedence or cipher order being lost.
# The same client with GnuTLS's NORMAL is served first, so a refusal
# is the server's doing and not a broken client.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/policy-lib.sh"
requires_cmd nbdsh psktool certtool
requires test -x "$abs_builddir/tls-priority-client"
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
client="$abs_builddir/tls-priority-client"
hexkey="$(sed -n 's/^alice://p' "$d/keys.psk")"
aesni=no
grep -qw aes /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo && aesni=yes
log="$tmpdir/log"
tls12='NORMAL:-VERS-TLS1.3'

for kind in psk x509; do
  if [ "$kind" = psk ]; then
    start_server -v --tls=require --tls-psk="$d/keys.psk" memory 1M 2>"$log"
    good="nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk"
    creds=(psk alice "$hexkey")
    kx=':+ECDHE-PSK:+DHE-PSK:+PSK'
  else
    start_server -v --tls=require --tls-certificates="$d/server" \
      memory 1M 2>"$log"
    good="nbds+unix:///?socket=$sock&tls-certificates=$d/client"
    creds=(x509 "$d/client")
    kx=
  fi
  fill_export "$good"
  # offer PRIORITY [CREDS...]: the session's description, or exit 1.
  offer () { local p="$1"; shift; t "$client" "$sock" "$p" "$@"; }

  offer "NORMAL$kx" "${creds[@]}" || fail "$kind: NORMAL was refused"

  for weak in NULL ARCFOUR-128 3DES-CBC; do
    n="$(grep -c 'handshake with connection' "$log" || :)"
    st=0
    offer "$tls12:-CIPHER-ALL:+$weak$kx" "${creds[@]}" 2>"$tmpdir/err" ||
      st=$?
    cat "$tmpdir/err"
    [ $st = 1 ] || fail "$kind: a client offering only $weak: exit $st"
    grep -q 'handshake: ' "$tmpdir/err" ||
      fail "$kind: $weak: the client did not fail in the handshake"
    [ "$(grep -c 'handshake with connection' "$log")" = $((n + 1)) ] ||
      fail "$kind: $weak: the server logged no handshake failure"
    check_export "$good" "$kind $weak"
  done
  st=0
  offer "$tls12:-KX-ALL:+ANON-ECDH:+ANON-DH" anon 2>"$tmpdir/err" || st=$?
  cat "$tmpdir/err"
  [ $st = 1 ] || fail "$kind: an anonymous-only client: exit $st"
  check_export "$good" "$kind anonymous"
  grep 'failed: ' "$log"

  # What stays on.
  desc="$(offer "$tls12:-CIPHER-ALL:+AES-256-CBC:+AES-128-CBC$kx" \
            "${creds[@]}")" || fail "$kind: a TLS 1.2 CBC client was refused"
  [[ "$desc" == "(TLS1.2)"*"-(AES-"*"-CBC)-"* ]] ||
    fail "$kind: the CBC client got $desc"
  desc="$(offer "NORMAL:-CIPHER-ALL:+CHACHA20-POLY1305$kx" "${creds[@]}")" ||
    fail "$kind: a ChaCha20-only client was refused"
  [[ "$desc" == *"(CHACHA20-POLY1305)"* ]] ||
    fail "$kind: the ChaCha20 client got $desc"
  if [ $aesni = yes ]; then
    desc="$(offer "NORMAL:-CIPHER-ALL:+CHACHA20-POLY1305:+AES-256-GCM:+AES-128-GCM$kx" \
              "${creds[@]}")" || fail "$kind: a ChaCha20-first client refused"
    echo "ChaCha20-first client: $desc"
    [[ "$desc" == "(TLS1.3)"*"-(AES-"*"-GCM)" ]] ||
      fail "$kind: with AES-NI the server's AES-GCM should win: $desc"
  fi
  stop_server
done
