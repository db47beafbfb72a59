#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ways of reaching an upstream that give a single connection, and
# shared=: command= starts the upstream (our server, then qemu-nbd) by
# socket activation and stops it at exit; socket-fd= uses an inherited
# connected socket; shared=true makes one upstream connection for every
# client, shared=false one per client, connections=N (multi-conn
# upstreams only) N per client (counted in the upstream's log).
# Catches: arg= lost or reordered, a spawned upstream left running, an
# inherited descriptor not used, shared= ignored, connections= ignored
# or used against an upstream without multi-conn.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdcopy qemu-nbd

want="$(t "$NBDKIT" -U - pattern 1M --run 'nbdcopy "$uri" -' | md5sum)"

echo "== command= (our server)"
got="$(t "$NBDKIT" -U - nbd command="$NBDKIT" arg=-P arg="$tmpdir/child.pid" \
         arg=pattern arg=1M --run 'nbdcopy "$uri" -; nbdcopy "$uri" -
           cp '"$tmpdir/child.pid $tmpdir/child.pid.seen" | md5sum)"
want2="$(t "$NBDKIT" -U - pattern 1M \
           --run 'nbdcopy "$uri" -; nbdcopy "$uri" -' | md5sum)"
[ "$got" = "$want2" ] || fail "command=: wrong bytes"
[ -s "$tmpdir/child.pid.seen" ] ||
  fail "command=: the child wrote no pid file"
child="$(cat "$tmpdir/child.pid.seen")"
wait_for 10 ! -d "/proc/$child" ||
  fail "command=: the upstream $child still runs after the server exited"

echo "== command= (qemu-nbd)"
t "$NBDKIT" -U - pattern 1M --run 'nbdcopy "$uri" '"$tmpdir/disk"
[ "$(t "$NBDKIT" -U - nbd command=qemu-nbd arg=-f arg=raw \
       arg="$tmpdir/disk" --run 'nbdcopy "$uri" -' | md5sum)" = "$want" ] ||
  fail "command=qemu-nbd: wrong bytes"

echo "== socket-fd="
log="$tmpdir/up.log"
start_upstream --filter=log pattern 1M logfile="$log"
got="$(t /usr/bin/python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
os.set_inheritable(s.fileno(), True)
argv = [a.replace("@FD@", str(s.fileno())) for a in sys.argv[2:]]
os.execvp(argv[0], argv)' "$up_sock" "$NBDKIT" -U - nbd socket-fd=@FD@ \
  --run 'nbdcopy "$uri" -' | md5sum)"
[ "$got" = "$want" ] || fail "socket-fd=: wrong bytes"
expect_fail t "$NBDKIT" -U - nbd socket-fd=99 --run true 2>/dev/null ||
  fail "socket-fd= of a closed descriptor was accepted"

echo "== shared="
# count_connections N ARGS...: N clients through nbd ARGS make how
# many upstream connections?
count_connections ()
{
  local n="$1" before after
  shift
  before="$(grep -c ' Connect export' "$log" || :)"
  t "$NBDKIT" -U - nbd socket="$up_sock" "$@" \
    --run 'for i in $(seq '"$n"'); do nbdinfo --size "$uri" >/dev/null; done'
  after="$(grep -c ' Connect export' "$log" || :)"
  echo $(( after - before ))
}
[ "$(count_connections 3 shared=true)" = 1 ] ||
  fail "shared=true: not one upstream connection for 3 clients"
[ "$(count_connections 3 shared=false)" = 3 ] ||
  fail "shared=false: not one upstream connection per client"
[ "$(count_connections 3)" = 3 ] ||
  fail "shared= left out: not one upstream connection per client"

echo "== connections="
# Three connections per client to an upstream that allows multi-conn
# (pattern), requests spread over them; one to qemu-nbd, which does not
# advertise multi-conn for a writable export.
[ "$(count_connections 1 connections=3)" = 3 ] ||
  fail "connections=3: not three upstream connections"
got="$(t "$NBDKIT" -U - nbd socket="$up_sock" connections=3 \
         --run 'nbdcopy --request-size=65536 "$uri" -' | md5sum)"
[ "$got" = "$want" ] || fail "connections=3: wrong bytes"
start_qemu_nbd "$tmpdir/disk"
[ "$(t nbdinfo --can multi-conn "nbd+unix:///?socket=$qemu_sock" &&
     echo yes || echo no)" = no ] || fail "qemu-nbd advertises multi-conn"
t "$NBDKIT" -U - -v nbd socket="$qemu_sock" connections=3 \
  --run 'nbdcopy "$uri" null:' 2> "$tmpdir/v.log"
grep -q 'no multi-conn upstream: one connection, not 3' "$tmpdir/v.log" ||
  fail "connections=3 to a server without multi-conn did not fall back to 1"
expect_fail t "$NBDKIT" -U - nbd command=true connections=2 --run true \
  2>/dev/null || fail "connections=2 with command= was accepted"
