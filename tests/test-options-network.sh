#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit(1)'s listening and protocol options, each doing what the page
# says: --ip-addr/--ipaddr, -4/--ipv4-only, -6/--ipv6-only, -p SERVICE, --vsock, -n/--newstyle/
# --new-style undoing -o/--oldstyle/--old-style, and --mask-handshake.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh ss

# listening PORT: the local addresses of TCP sockets listening on PORT.
listening ()
{
  ss -Hltn "sport = :$1" | awk '{print $4}' | sort | tr '\n' ' '
}

# --ip-addr is --ipaddr; clients reach the data through it.
start_tcp_server --ip-addr=127.0.0.1 memory 1M
[ "$(listening "$port")" = "127.0.0.1:$port " ] ||
  fail "--ip-addr=127.0.0.1 listens on: $(listening "$port")"
[ "$(t nbdinfo --size "$uri")" = 1048576 ] || fail "no data over --ip-addr"
stop_server

# Without -i the server listens on every address of both families;
# -4 and -6 keep one.  (Wildcard addresses: nothing is reachable from
# outside a sandbox that has no network.)
for opt in -4 --ipv4-only -6 --ipv6-only; do
  port="$(free_port)"
  "$NBDKIT" -f -p "$port" -P "$tmpdir/$opt.pid" $opt memory 1M &
  pid=$!
  cleanup_fn _kill_pid "$pid"
  wait_for 20 -s "$tmpdir/$opt.pid" || fail "$opt: server did not start"
  got="$(listening "$port")"
  case "$opt" in
    -4|--ipv4-only) want="0.0.0.0:$port " ;;
    *) want="[::]:$port " ;;
  esac
  [ "$got" = "$want" ] || fail "$opt listens on: $got (want $want)"
  _kill_pid "$pid"
done

# -n after -o, and -o after -n: the last one wins.
for opts in "-o -n" "--oldstyle --newstyle" "--old-style --new-style"; do
  t "$NBDKIT" -U - $opts memory 1M \
    --run 'nbdsh -u "$uri" -c "print(h.get_protocol())"' > "$tmpdir/p"
  [ "$(cat "$tmpdir/p")" = newstyle-fixed ] ||
    fail "$opts: protocol $(cat "$tmpdir/p")"
done
for opts in "-n -o" "--newstyle --old-style"; do
  t "$NBDKIT" -U - $opts memory 1M \
    --run 'nbdsh -u "$uri" -c "print(h.get_protocol())"' > "$tmpdir/p"
  [ "$(cat "$tmpdir/p")" = oldstyle ] ||
    fail "$opts: protocol $(cat "$tmpdir/p")"
done

# --mask-handshake: the global flags offered, as a client sees them;
# without fixed newstyle the client can still read the data.
for m in 0 1 2 3 0xffff; do
  t "$NBDKIT" -U - --mask-handshake=$m memory 1M --run 'nbdsh -u "$uri" -c "
print(h.get_handshake_flags(), h.get_protocol(), h.pread(4, 0) == bytes(4))
"' > "$tmpdir/m"
  case $m in
    0) want="0 newstyle True" ;;
    1) want="1 newstyle-fixed True" ;;
    2) want="2 newstyle True" ;;
    *) want="3 newstyle-fixed True" ;;
  esac
  [ "$(cat "$tmpdir/m")" = "$want" ] ||
    fail "--mask-handshake=$m: client saw $(cat "$tmpdir/m"), want $want"
done
expect_fail "$NBDKIT" -U - --mask-handshake=x memory 1M --run true \
  2>/dev/null

# -p SERVICE: resolved (nbd is 10809 in /etc/services), so $port and
# $uri hold the number.  --vsock listens there when the kernel has
# AF_VSOCK (no TCP port is taken); it says clearly when it has not.
if [ -e /dev/vsock ] || python3 -c 'import socket; socket.socket(socket.AF_VSOCK)' 2>/dev/null
then
  # The --run command starts only once the socket listens.  (A client
  # cannot connect in a sandbox without a vsock transport, and ss may
  # not list vsock sockets, so that is all that is checked.)
  t "$NBDKIT" --vsock -p nbd memory 1M --run 'echo "$port $uri"' \
    > "$tmpdir/v"
  cat "$tmpdir/v"
  [ "$(cat "$tmpdir/v")" = "10809 nbd+vsock://1:10809/" ] ||
    fail "--vsock -p nbd: \$port \$uri are $(cat "$tmpdir/v")"
else
  echo "no AF_VSOCK here: checking the error instead"
  if "$NBDKIT" --vsock -p nbd memory 1M --run true 2>"$tmpdir/err"; then
    fail "--vsock without AF_VSOCK succeeded"
  fi
  grep -q -- '--vsock' "$tmpdir/err" || fail "--vsock error does not say so"
fi
"$NBDKIT" -p no-such-service-here memory 1M --run true 2>"$tmpdir/err" &&
  fail "-p with an unknown service was accepted"
grep -q 'not a valid port number or service' "$tmpdir/err" ||
  fail "-p: no clear message for an unknown service"
exit 0
