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
requires_cmd bpftrace nbdsh certtool psktool
requires_root
requires_probes
[ "$("$NBDKIT" --dump-config | grep '^tls=')" = tls=yes ] ||
  fail "this build has no TLS (configure found no gnutls)"
client="$abs_builddir/tls-hostile-client"
[ -x "$client" ] || fail "$client was not built"
tracing_lock

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:tls_handshake_done {
  printf("%d done %d %d %s\n", pid, arg0, arg1, str(arg2));
}
usdt:$b:nbdkit:connection_close {
  printf("%d close %d %s\n", pid, arg0, str(arg1));
}
usdt:$b:nbdkit:limit_hit { printf("%d limit %d %s\n", pid, arg0, str(arg1)); }
BT
start_bpftrace 100 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt"

# The canary: 64 KiB that every good client reads back.
canary="bytes(range(256)) * 256"
good () {
  t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$good_uri')
assert h.get_tls_negotiated()
assert h.pread(65536, 0) == $canary
"
}

# expect KIND CASE ID OUTPUT-REGEX PROBE-REGEX...: run CASE as
# connection ID (what it printed is left in $out), check what it said,
# that the server lives and a good client is served (connection ID+1);
# the probe lines (for ID) are checked once the tracer has stopped.
expect () {
  local kind=$1 case=$2 said=$4 re
  shift 4
  out="$(t "$client" "$sock" "$creds" "$case")" ||
    fail "$kind $case: $out"
  echo "$kind $out"
  [[ $out =~ $said ]] || fail "$kind $case: wanted /$said/"
  kill -0 "$server_pid" || fail "$kind $case: the server died"
  good
  for re in "$@"; do checks+=("$kind $case	$server_pid	$re"); done
}
checks=()

for kind in psk x509; do
  if [ $kind = psk ]; then
    start_server --tls=require --tls-psk="$d/keys.psk" \
      --handshake-timeout=2 memory 1M
    creds="psk:$d/keys.psk:alice"
    good_uri="nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk"
  else
    start_server --tls=require --tls-certificates="$d/server" \
      --tls-verify-peer --handshake-timeout=2 memory 1M
    creds="x509:$d/client"
    good_uri="nbds+unix:///?socket=$sock&tls-certificates=$d/client"
  fi
  t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$good_uri')
h.pwrite($canary, 0)
"                                                       # connection 1

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
    checks+=("$kind ccs-first	$server_pid	done 10 0 ")
  else
    checks+=("$kind ccs-first	$server_pid	done 10 1 \(TLS1\.3\)")
  fi
  stop_server
done

sleep 0.5
interrupt_tracer "$bt"
cat "$tmpdir/out"
for c in "${checks[@]}"; do
  IFS=$'\t' read -r what pid re <<<"$c"
  grep -Eq "^$pid $re" "$tmpdir/out" || fail "$what: no probe line /$re/"
done
