#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A TLS client misbehaving at the record level after a good handshake
# and NBD_OPT_GO (tls-hostile-client.c), with PSK and with X.509
# (--tls-verify-peer), --tls=require.  Each case owns 128 KiB of the
# export at BASE (block 0, block 1):
#   alert-mid-write         block 0 written (0xa5) and acknowledged; a
#                           write of 0x5b over blocks 0-1 stops half way
#                           with a fatal alert;
#   close-notify-mid-write  the same, cut by close_notify;
#   replay                  0xa5 written (its records kept), then 0x3c,
#                           then the 0xa5 records sent again;
#   tamper                  0xa5 written, then a write of 0x3c whose
#                           records each have one bit flipped;
#   renegotiate             a TLS 1.2 session writes 0xa5, then starts a
#                           second handshake on the same session;
#   key-update              (not an attack: the check that refusing
#                           renegotiation did not also refuse TLS 1.3's
#                           KeyUpdate) 0xa5 to block 0, new keys both
#                           ways, 0x3c to block 1: both acknowledged,
#                           the connection ends cleanly ("eof").
# What the server does (asserted, with the probes that say why): no
# reply to the cut or damaged request, the connection closed at once,
# protocol_violation ("write payload cut short" when the payload was
# cut, "short request header" when the next request's header cannot be
# read), connection_close "read error", and the debug log line naming
# GnuTLS's error ("A TLS fatal alert has been received", "Decryption
# has failed" for a replayed or tampered record, "Rehandshake was
# requested by the peer"); close_notify is a clean end of the stream
# to GnuTLS, so only the cut payload is reported.
# Renegotiation is refused by closing the connection (GnuTLS hands the
# server GNUTLS_E_REHANDSHAKE; it does not renegotiate).
# After each case: the server is alive, a good client (nbdsh over TLS)
# reads the canary at offset 0, and the case's blocks read back as the
# last acknowledged write left them: 0xa5 then zeroes after a cut
# write (no byte of the cut payload written, even on the zero-copy
# write path, which takes payloads over 64 KiB), 0x3c after the replay,
# 0xa5 after tampering and renegotiation.
# What it catches: a crash or hang, a cut or damaged write applied in
# part or whole, a replayed record accepted, renegotiation that breaks
# the connection's state, a good client no longer served, a failure
# without its probe or with another reason.
source "$(dirname "$0")/functions.sh"
source "$srcdir/tls/hostile-lib.sh"

hostile_trace <<BT
usdt:$b:nbdkit:protocol_violation {
  printf("%d violation %d %s\n", pid, arg0, str(arg1));
}
usdt:$b:nbdkit:log /strncmp(str(arg2), "TLS:", 4) == 0/ {
  printf("%d log %d %s\n", pid, arg3, str(arg2));
}
BT

# expect KIND CASE BASE BLOCK0 BLOCK1 OUTPUT-REGEX PROBE-REGEX...: run
# CASE at BASE, check what the client said, that the server lives, that
# a good client reads the canary and the case's blocks as BLOCK0 and
# BLOCK1 (byte values); the probe lines are checked once the tracer has
# stopped.
expect () {
  local kind=$1 case=$2 base=$3 b0=$4 b1=$5 said=$6
  shift 6
  hostile "$kind" "$case" "$said" "$base"
  good "
got = h.pread(131072, $base)
assert got[:65536] == bytes([$b0]) * 65536, '$case: block 0 changed'
assert got[65536:] == bytes([$b1]) * 65536, '$case: block 1 changed'
"
  want_probes "$kind" "$case" "$@"
}
K=262144

for kind in psk x509; do
  hostile_server $kind memory 2M
  good "h.pwrite($canary, 0)"                             # connection 1

  expect $kind alert-mid-write $((1*K)) 0xa5 0 \
    '^alert-mid-write: no reply to the cut write' \
    'done 2 1 ' 'violation 2 write payload cut short' 'close 2 read error' \
    'log 2 TLS: connection 2: receive: A TLS fatal alert has been received'
  expect $kind close-notify-mid-write $((2*K)) 0xa5 0 \
    '^close-notify-mid-write: no reply to the cut write' \
    'done 4 1 ' 'violation 4 write payload cut short' 'close 4 read error'
  expect $kind replay $((3*K)) 0x3c 0 '^replay: replayed records refused' \
    'violation 6 short request header' 'close 6 read error' \
    'log 6 TLS: connection 6: receive: Decryption has failed'
  expect $kind tamper $((4*K)) 0xa5 0 '^tamper: tampered record refused' \
    'violation 8 short request header' 'close 8 read error' \
    'log 8 TLS: connection 8: receive: Decryption has failed'
  expect $kind renegotiate $((5*K)) 0xa5 0 \
    '^renegotiate: renegotiation refused' \
    'done 10 1 \(TLS1\.2\)' 'close 10 read error' \
    'log 10 TLS: connection 10: receive: Rehandshake was requested'
  expect $kind key-update $((6*K)) 0xa5 0x3c \
    '^key-update: keys updated, connection intact' \
    'done 12 1 \(TLS1\.3\)' 'close 12 eof'
  stop_server
done

check_probes
