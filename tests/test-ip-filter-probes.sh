#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ip filter's probes fire under bpftrace with the peer and the rule:
# ip_allowed for a Unix-socket client let in by allow=uid: (its pid,
# uid and gid in the description), ip_refused for a TCP client on
# 127.0.0.1 turned away by a CIDR deny rule (its address and port).
# With a dn: rule, left open before TLS: each client gets one decision
# (one probe), by the DN for the client it names and by deny=anyunix
# for another; and none after TLS for a client decided before it.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh nbdinfo certtool
tracing_lock

so="$(filter_so ip)"
uid="$(id -u)"
gid="$(id -g)"
prog="usdt:$so:nbdkit:ip_allowed { printf(\"allowed|%s|%s\\n\", str(arg0), str(arg1)); }
usdt:$so:nbdkit:ip_refused { printf(\"refused|%s|%s\\n\", str(arg0), str(arg1)); }"

# Allowed, on a Unix socket: the client says its own pid.
start_server --filter=ip memory 1M allow=uid:$uid deny=all
trace_start "$tmpdir/unix" "$prog"
pid="$(t nbdsh -u "$uri" -c 'import os; print(os.getpid())')"
trace_stop
cat "$tmpdir/unix"
want="allowed|unix pid=$pid uid=$uid gid=$gid|allow=uid:$uid"
grep -qxF "$want" "$tmpdir/unix" || fail "no probe: $want"
[ "$(grep -c '^allowed|' "$tmpdir/unix")" -eq 1 ] ||
  fail "ip_allowed did not fire exactly once"
! grep -q '^refused|' "$tmpdir/unix" ||
  fail "ip_refused fired for a client let in"
stop_server

# Refused, on TCP: the client's source port is in the peer string.
start_tcp_server --filter=ip memory 1M deny=10.0.0.0/8,127.0.0.0/8
trace_start "$tmpdir/tcp" "$prog"
expect_fail t nbdinfo --size "$uri" 2> /dev/null
trace_stop
cat "$tmpdir/tcp"
grep -Eqx 'refused\|127\.0\.0\.1:[0-9]+\|deny=127\.0\.0\.0/8' "$tmpdir/tcp" ||
  fail "no ip_refused for 127.0.0.1 naming deny=127.0.0.0/8"
! grep -q '^allowed|' "$tmpdir/tcp" ||
  fail "ip_allowed fired for a refused client"
stop_server

# Decided after TLS, once per client.
t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
dn="CN=client.test,O=nbdkit tests"
start_server --tls=require --tls-certificates="$d/server" --tls-verify-peer \
  --filter=ip memory 1M "allow=dn:$dn" deny=anyunix
trace_start "$tmpdir/tls.out" "$prog"
t nbdinfo --size "nbds+unix:///?socket=$sock&tls-certificates=$d/client" ||
  fail "the client the dn: rule names was refused"
# Another client of the same CA: refused by deny=anyunix after TLS.
expect_fail t nbdinfo --size \
  "nbds+unix:///?socket=$sock&tls-certificates=$d/client-other" 2>/dev/null
trace_stop
cat "$tmpdir/tls.out"
grep -Eqx "allowed\|unix pid=[0-9]+ uid=$uid gid=$gid\|allow=dn:$dn" \
  "$tmpdir/tls.out" || fail "no ip_allowed naming allow=dn:"
[ "$(grep -c '^allowed|' "$tmpdir/tls.out")" -eq 1 ] ||
  fail "not one ip_allowed"
[ "$(grep -c '^refused|.*|deny=anyunix$' "$tmpdir/tls.out")" -eq 1 ] ||
  fail "not one ip_refused naming deny=anyunix"
[ "$(grep -c '^\(allowed\|refused\)|' "$tmpdir/tls.out")" -eq 2 ] ||
  fail "more than one decision per client"
stop_server

# Decided before TLS (allow=uid: matches), so no second decision after.
start_server --tls=require --tls-certificates="$d/server" --tls-verify-peer \
  --filter=ip memory 1M "allow=uid:$uid" "deny=dn:$dn"
trace_start "$tmpdir/early.out" "$prog"
t nbdinfo --size "nbds+unix:///?socket=$sock&tls-certificates=$d/client" ||
  fail "allow=uid: did not admit the client"
trace_stop
cat "$tmpdir/early.out"
[ "$(grep -c "^allowed|.*|allow=uid:$uid\$" "$tmpdir/early.out")" -eq 1 ] ||
  fail "not one ip_allowed naming allow=uid:"
[ "$(grep -c '^\(allowed\|refused\)|' "$tmpdir/early.out")" -eq 1 ] ||
  fail "a client decided before TLS was decided again"
