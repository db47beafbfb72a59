#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The curl plugin over HTTPS, against nginx with a certificate made by
# certtool (tests/make-tls-files.sh: a private CA, a server certificate
# for localhost and 127.0.0.1).  Without the CA the certificate check
# fails at start-up, cleanly; sslverify=false, cainfo= and capath= each
# make it pass, with the file's bytes (and Debian's nbdkit with cainfo=
# gets the same).  ssl-version=tlsv1.3 against a server that speaks
# only TLS 1.2 fails; ssl-cipher-list= and tls13-ciphers= pick the
# cipher nginx logs (with a libcurl on GnuTLS, which cannot, they are
# refused at start-up).  A certificate from another CA fails even with
# cainfo= (the check is real).
source "$(dirname "$0")/functions.sh"
source "$srcdir/nginx-start.sh"
requires_cmd certtool openssl nbdcopy nbdinfo cmp
# Debian's server (/usr/bin/nbdkit here; /usr/sbin on some systems).
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/sbin/nbdkit

bash "$srcdir/make-tls-files.sh" "$tmpdir/pki" ||
  fail "make-tls-files.sh failed"
pki="$tmpdir/pki"
mkdir -p "$tmpdir/www"
img="$tmpdir/www/disk.img"
head -c $(( 2 * 1024 * 1024 + 4321 )) /dev/urandom > "$img"
port="$(free_port)" port12="$(free_port)" portrogue="$(free_port)"
start_nginx "$tmpdir/nginx" "127.0.0.1:$port ssl" "root $tmpdir/www;
    ssl_certificate $pki/server/server-cert.pem;
    ssl_certificate_key $pki/server/server-key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;" \
  "server { listen 127.0.0.1:$port12 ssl; root $tmpdir/www;
    ssl_certificate $pki/server/server-cert.pem;
    ssl_certificate_key $pki/server/server-key.pem;
    ssl_protocols TLSv1.2; }
  server { listen 127.0.0.1:$portrogue ssl; root $tmpdir/www;
    ssl_certificate $pki/server-rogue/server-cert.pem;
    ssl_certificate_key $pki/server-rogue/server-key.pem; }"
url="https://localhost:$port/disk.img"
log="$tmpdir/nginx/access.log"
export tmpdir

# start_fails REGEX ARGS...: one error line matching REGEX, exit 1.
start_fails ()
{
  local re="$1" status=0
  shift
  t "$NBDKIT" -U - curl "$@" --run 'exit 0' 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "curl $*: exit status $status, expected 1"
  [ "$(grep -c error "$tmpdir/err")" -eq 1 ] ||
    fail "curl $*: not exactly one error line"
  grep -Eq "^nbdkit: curl: error: .*($re)" "$tmpdir/err" ||
    fail "curl $*: the error does not match '$re'"
}

# copy_ok NAME ARGS...: nbdcopy through the plugin gives the file.
copy_ok ()
{
  local name="$1"
  shift
  t "$NBDKIT" -U - curl "$@" --run "nbdcopy \"\$uri\" $tmpdir/$name" ||
    fail "curl $*: failed"
  cmp "$img" "$tmpdir/$name" || fail "curl $*: the bytes differ"
}

start_fails 'certificate' "$url"
copy_ok noverify "$url" sslverify=false
copy_ok cainfo "$url" cainfo="$pki/ca-cert.pem"
mkdir "$tmpdir/capath"
cp "$pki/ca-cert.pem" "$tmpdir/capath/"
openssl rehash "$tmpdir/capath"
copy_ok bypath "$url" capath="$tmpdir/capath" cainfo=
start_fails 'certificate' "https://localhost:$portrogue/disk.img" \
  cainfo="$pki/ca-cert.pem"

if [ -x "$debian_nbdkit" ] &&
   "$debian_nbdkit" curl --dump-plugin >/dev/null 2>&1; then
  t "$debian_nbdkit" -U - curl "$url" cainfo="$pki/ca-cert.pem" \
    --run 'nbdcopy "$uri" "$tmpdir/theirs"' || fail "Debian's failed"
  cmp "$tmpdir/cainfo" "$tmpdir/theirs" || fail "bytes differ from Debian's"
fi

# TLS versions and ciphers, as nginx saw them.
: > "$log"
copy_ok v13 "$url" cainfo="$pki/ca-cert.pem" ssl-version=tlsv1.3
grep -q 'tls="TLSv1.3 ' "$log" || { cat "$log"; fail "not TLS 1.3"; }
start_fails 'version|SSL|TLS' "https://localhost:$port12/disk.img" \
  cainfo="$pki/ca-cert.pem" ssl-version=tlsv1.3
copy_ok v12 "https://localhost:$port12/disk.img" cainfo="$pki/ca-cert.pem" \
  ssl-version=tlsv1.2
# libcurl on GnuTLS (Debian's libcurl-gnutls, which Debian's nbdkit
# uses too) cannot choose ciphers: refused at start-up, not ignored.
if "$NBDKIT" curl --dump-plugin | grep -q "^curl_ssl_version=GnuTLS"; then
  start_fails 'ssl-cipher-list:.*cannot restrict' "$url" \
    ssl-cipher-list=ECDHE-ECDSA-AES128-GCM-SHA256
  start_fails 'tls13-ciphers:.*cannot restrict' "$url" \
    tls13-ciphers=TLS_CHACHA20_POLY1305_SHA256
else
  : > "$log"
  copy_ok c13 "$url" cainfo="$pki/ca-cert.pem" ssl-version=tlsv1.3 \
    tls13-ciphers=TLS_CHACHA20_POLY1305_SHA256
  grep -q 'tls="TLSv1.3 TLS_CHACHA20_POLY1305_SHA256"' "$log" ||
    { cat "$log"; fail "tls13-ciphers= was not used"; }
  : > "$log"
  copy_ok c12 "https://localhost:$port12/disk.img" \
    cainfo="$pki/ca-cert.pem" ssl-cipher-list=ECDHE-ECDSA-AES128-GCM-SHA256
  grep -q 'tls="TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256"' "$log" ||
    { cat "$log"; fail "ssl-cipher-list= was not used"; }
fi
