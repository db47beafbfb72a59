#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A TLS client misbehaving right after NBD_OPT_STARTTLS
# (tls-hostile-client.c), with PSK and with X.509 (--tls-verify-peer),
# --tls=require and a 2 s --handshake-timeout:
#   garbage      bytes that are no TLS record: refused at once
#                (tls_handshake_done ok=0 "An unexpected TLS packet was
#                received.", connection_close "handshake ended");
#   hello-1byte  the real ClientHello in records of one byte each: TLS
#                allows it and the server completes the handshake
#                (tls_handshake_done ok=1) and serves the export;
#   hello-cut    half a ClientHello, then silence: dropped by the
#                handshake timeout, not held (limit_hit
#                handshake_timeout, ok=0 "The operation timed out",
#                connection_close "handshake timeout");
#   alert-first  a fatal alert where the ClientHello belongs: refused
#                (ok=0 "An unexpected TLS packet was received.");
#   ccs-first    a ChangeCipherSpec record first, then the real
#                handshake: GnuTLS 3.7 drops the record (TLS 1.3 lets a
#                peer send one for middlebox compatibility, though RFC
#                8446 5 wants it refused before the first ClientHello)
#                and the handshake completes (ok=1); harmless, as the
#                record changes no state.  A refusal (ok=0) passes too.
# After each case: the server is alive and a good client (nbdsh over
# TLS) reads back the canary written at the start.
# What it catches: a server that crashes or hangs on any of these, one
# that holds a cut handshake forever (the client waits 15 s, the test
# wants < 6 s), a refusal that does not close the connection or fires no
# failure probe (or the wrong reason), a good client no longer served or
# data changed by a failed handshake.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/hostile-lib.sh"

hostile_trace <<BT
usdt:$b:nbdkit:limit_hit { printf("%d limit %d %s\n", pid, arg0, str(arg1)); }
BT

# expect KIND CASE ID OUTPUT-REGEX PROBE-REGEX...: run CASE as
# connection ID (what it printed is left in $out), check what it said,
# that the server lives and a good client is served (connection ID+1);
# the probe lines (for ID) are checked once the tracer has stopped.
expect () {
  local kind=$1 case=$2 said=$4
  shift 4
  hostile "$kind" "$case" "$said"
  good
  want_probes "$kind" "$case" "$@"
}

for kind in psk x509; do
  hostile_server $kind --handshake-timeout=2 memory 1M
  good "h.pwrite($canary, 0)"                             # connection 1

  expect $kind garbage 2 '^garbage: closed the connection' \
    'done 2 0 An unexpected TLS packet' 'close 2 handshake ended'
  expect $kind hello-1byte 4 '^hello-1byte: handshake completed .*export read' \
    'done 4 1 \(TLS1\.3\)' 'close 4 eof'
  expect $kind hello-cut 6 '^hello-cut: closed the connection after [0-5]\.' \
    'limit 6 handshake_timeout' 'done 6 0 The operation timed out' \
    'close 6 handshake timeout'
  expect $kind alert-first 8 '^alert-first: (refused|closed)' \
    'done 8 0 An unexpected TLS packet' 'close 8 handshake ended'
  # RFC 8446 asks for a refusal here; GnuTLS 3.7 drops the record.
  # Either is safe; the probe must match what the client saw.
  expect $kind ccs-first 10 \
    '^ccs-first: (record ignored, handshake completed|refused)'
  if [[ $out =~ refused ]]; then
    want_probes $kind ccs-first 'done 10 0 '
  else
    want_probes $kind ccs-first 'done 10 1 \(TLS1\.3\)'
  fi
  stop_server
done

check_probes
