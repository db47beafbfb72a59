#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS from the nbd plugin to an upstream that requires it (our own
# server with --tls=require): with pre-shared keys (tls-psk=,
# tls-username=) and with X.509 client certificates (tls-certificates=,
# also in an nbds+unix URI).  The right credentials give the upstream's
# bytes; no TLS, the wrong key or no client certificate fail at start-up
# (shared=true) with one line naming the plugin, and a per-client
# connection fails for that client only.
# Catches: tls-* parameters not reaching libnbd, tls=require silently
# falling back to plain text, a failure that hangs or kills the server.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdsh nbdcopy certtool psktool
d="$tmpdir/tls"
t "$srcdir/make-tls-files.sh" "$d" > /dev/null || fail "make-tls-files.sh"

# The upstream's disk: 1 MiB of a known pattern.
printf 'tls!%.0s' $(seq 262144) > "$tmpdir/disk"
want="$(md5sum < "$tmpdir/disk")"

# bytes ARGS...: the md5 of what the plugin serves with ARGS.
bytes ()
{
  t "$NBDKIT" -U - nbd "$@" --run 'nbdcopy "$uri" -' | md5sum
}

# refused WHAT ARGS...: with shared=true the server must stop at start-up
# with status 1 and an nbd: message.
refused ()
{
  local what="$1" status=0
  shift
  t "$NBDKIT" -U - nbd shared=true "$@" --run true 2> "$tmpdir/err" ||
    status=$?
  cat "$tmpdir/err"
  [ "$status" = 1 ] || fail "$what: exit status $status, not 1"
  grep -q '^nbdkit: nbd: error: ' "$tmpdir/err" || fail "$what: no message from the plugin"
}

echo "== PSK"
start_upstream --tls=require --tls-psk="$d/keys.psk" file "$tmpdir/disk"
[ "$(bytes socket="$up_sock" tls=require tls-psk="$d/keys.psk" \
       tls-username=alice)" = "$want" ] || fail "PSK: wrong bytes"
# tls-psk alone turns TLS on.
[ "$(bytes socket="$up_sock" tls-psk="$d/keys.psk" tls-username=alice)" = \
  "$want" ] || fail "PSK with tls= left out: wrong bytes"
refused "no TLS" socket="$up_sock"
refused "wrong key" socket="$up_sock" tls=require tls-psk="$d/wrong.psk" \
  tls-username=alice
# Per client: the client fails, the server stays up.
start_server nbd socket="$up_sock" tls=require tls-psk="$d/wrong.psk" \
  tls-username=alice
expect_fail t nbdinfo --size "$uri" 2>/dev/null ||
  fail "a client got through with the wrong key"
kill -0 "$server_pid" || fail "the server died after a refused client"
stop_server
stop_upstream

echo "== X.509"
start_upstream --tls=require --tls-certificates="$d/server" \
  --tls-verify-peer file "$tmpdir/disk"
[ "$(bytes socket="$up_sock" tls=require \
       tls-certificates="$d/client")" = "$want" ] ||
  fail "X.509: wrong bytes"
[ "$(bytes "nbds+unix:///?socket=$up_sock&tls-certificates=$d/client")" = \
  "$want" ] || fail "X.509 by URI: wrong bytes"
refused "no client certificate" socket="$up_sock" tls=require \
  tls-certificates="$d/client-nocert"
refused "rogue client certificate" socket="$up_sock" tls=require \
  tls-certificates="$d/client-rogue"
refused "TLS off" "nbd+unix:///?socket=$up_sock"
