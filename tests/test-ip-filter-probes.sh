#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ip filter's probes fire under bpftrace with the peer and the rule:
# ip_allowed for a Unix-socket client let in by allow=uid: (its pid,
# uid and gid in the description), ip_refused for a TCP client on
# 127.0.0.1 turned away by a CIDR deny rule (its address and port).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh nbdinfo
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
