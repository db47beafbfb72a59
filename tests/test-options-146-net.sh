#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Connection options of nbdkit 1.36 to 1.42, as a client sees them:
# --run without -U/-p/-i listens on a private Unix socket ($port empty;
# with -i/-p it is TCP); --keepalive turns on SO_KEEPALIVE on accepted
# TCP connections (ss shows the keepalive timer, absent without it);
# --timeout=500ms (the same as --handshake-timeout) drops a client that
# never negotiates; --no-mc answers meta context options with
# NBD_REP_ERR_UNSUP, so a client gets no base:allocation.  Debian's
# nbdkit 1.32.5 lacks all of these (its --run still listens on TCP
# port 10809), so there is nothing to compare against.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo ss

# --run's default listener, and TCP when asked for.
t "$NBDKIT" memory 1M --run 'echo "$uri|$port|$unixsocket"
  nbdinfo --size "$uri"' > "$tmpdir/out"
IFS='|' read -r uri port unixsocket < "$tmpdir/out"
case "$uri" in nbd+unix:///\?socket=/*) ;; *) fail "--run \$uri $uri" ;; esac
[ -z "$port" ] && [ "$uri" = "nbd+unix:///?socket=$unixsocket" ] ||
  fail "--run: \$port [$port], \$unixsocket [$unixsocket]"
grep -qx 1048576 "$tmpdir/out" || fail "--run: the client was not served"
[ ! -e "$unixsocket" ] || fail "the private socket was left behind"
p="$(free_port)"
t "$NBDKIT" -i 127.0.0.1 -p "$p" memory 1M \
  --run 'echo "$uri|$port|$unixsocket"' > "$tmpdir/out"
[ "$(cat "$tmpdir/out")" = "nbd://127.0.0.1:$p/|$p|" ] ||
  fail "--run -p: $(cat "$tmpdir/out")"

# --keepalive: an idle client's socket has the keepalive timer.
# keepalive_timer PORT: ss's timer for the server's side of the
# connection a client (started here, idle for 1 s) holds open.
keepalive_timer ()
{
  /usr/bin/python3 - "$1" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.recv(18)
time.sleep(2)
PY
  local client=$! i
  for i in $(seq 20); do
    ss -tno state established "( sport = :$1 )" > "$tmpdir/ss"
    grep -q 127.0.0.1 "$tmpdir/ss" && break
    sleep 0.1
  done
  cat "$tmpdir/ss"
  wait $client
}
start_tcp_server --keepalive memory 1M
keepalive_timer "$port" | grep -q 'timer:(keepalive' ||
  fail "--keepalive: no keepalive timer on the connection"
stop_server
start_tcp_server memory 1M
keepalive_timer "$port" | grep -q 'timer:(keepalive' &&
  fail "keepalive on without --keepalive"
stop_server

# --timeout: a client that sends nothing is dropped after 500 ms.
start_server --timeout=500ms memory 1M
t /usr/bin/python3 - "$sock" <<'PY' || fail "--timeout=500ms"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
start = time.monotonic()
while s.recv(4096):
    pass
took = time.monotonic() - start
print("dropped after %.2f s" % took)
sys.exit(0 if 0.4 < took < 3 else 1)
PY
stop_server

# --no-mc: no base:allocation, however the client asks.
for opt in --no-mc --no-meta-contexts ""; do
  t "$NBDKIT" $opt memory 1M --run 'nbdsh --base-allocation -u "$uri" -c "
print(h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION))"
    nbdsh -c "import errno
h.set_opt_mode(True); h.connect_uri(\"$uri\")
try:
    print(h.opt_list_meta_context(lambda name: 0))
except nbd.Error as e:
    print(e.errnum == errno.ENOTSUP)" 2>&1
    nbdinfo --map "$uri" 2>&1 || :' > "$tmpdir/mc$opt"
  cat "$tmpdir/mc$opt"
done
for opt in --no-mc --no-meta-contexts; do
  [ "$(head -2 "$tmpdir/mc$opt")" = "False
True" ] || fail "$opt: a meta context was negotiated or listed"
  grep -q 'does not support metadata context "base:allocation"' \
    "$tmpdir/mc$opt" || fail "$opt: nbdinfo --map did not fail"
done
[ "$(head -2 "$tmpdir/mc")" = "True
1" ] || fail "without --no-mc: no base:allocation"
grep -q 'hole,zero' "$tmpdir/mc" || fail "without --no-mc: no map"
exit 0
