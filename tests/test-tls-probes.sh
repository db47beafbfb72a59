#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The TLS probes under bpftrace: tls_handshake_start with the kind of
# credentials, then tls_handshake_done with ok=1, the session's
# description and the PSK user for a good client; ok=0 and GnuTLS's
# error for a client with the wrong key, followed by handshake_fail
# "TLS handshake failed".  Then the same through the operator's view,
# tools/nbdkit-handshake.bt (nbdkit-trace handshake).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdinfo psktool
requires_root
requires_probes
assert_tls_build
tracing_lock

psktool -u alice -p "$tmpdir/keys.psk" >/dev/null
psktool -u alice -p "$tmpdir/wrong.psk" >/dev/null

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:tls_handshake_start {
  printf("start %d %s\n", arg0, str(arg1));
}
usdt:$b:nbdkit:tls_handshake_done {
  printf("done %d %d %s|%s\n", arg0, arg1, str(arg2), str(arg3));
}
usdt:$b:nbdkit:handshake_fail { printf("fail %d %s\n", arg0, str(arg1)); }
BT
start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt"

start_server --tls=require --tls-psk="$tmpdir/keys.psk" memory 1M
t nbdinfo "nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/keys.psk" \
  >/dev/null
if t nbdinfo "nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/wrong.psk" \
     >/dev/null 2>&1; then
  fail "wrong PSK accepted"
fi
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/out"

grep -Eq '^start 1 psk$' "$tmpdir/out" || fail "no tls_handshake_start 1 psk"
grep -Eq '^done 1 1 \(TLS1\.[23]\)-.*\|alice$' "$tmpdir/out" ||
  fail "no successful tls_handshake_done naming alice for connection 1"
grep -Eq '^start 2 psk$' "$tmpdir/out" || fail "no tls_handshake_start 2 psk"
grep -Eq '^done 2 0 .+\|$' "$tmpdir/out" ||
  fail "no failed tls_handshake_done for connection 2"
grep -Eq '^fail 2 TLS handshake failed$' "$tmpdir/out" ||
  fail "no handshake_fail 'TLS handshake failed' for connection 2"

# The handshake view shows the same, one line per TLS event.
start_server --tls=require --tls-psk="$tmpdir/keys.psk" memory 1M
out="$tmpdir/tool.out"
start_tool "$out" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" handshake
sleep 1
t nbdinfo "nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/keys.psk" \
  >/dev/null
t nbdinfo "nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/wrong.psk" \
  >/dev/null 2>&1 && fail "wrong PSK accepted"
sleep 0.5
interrupt_tracer "$tool"
cat "$out"
grep -Eq '^[0-9]+ +1 +tls +start psk$' "$out" || fail "tool: no tls start"
grep -Eq '^[0-9]+ +1 +tls +secured \(TLS1\.[23]\).* peer "alice"$' "$out" ||
  fail "tool: no secured line for alice"
grep -Eq '^[0-9]+ +2 +tls +failed .+' "$out" || fail "tool: no tls failure"
grep -Eq '^[0-9]+ +2 +fail +TLS handshake failed$' "$out" ||
  fail "tool: no handshake failure line"
grep -q '^@tls_failures\[' "$out" || fail "tool: no TLS failure summary"
