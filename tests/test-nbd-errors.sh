#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Bad configurations and unreachable upstreams end quickly with one
# clear line from the plugin and exit status 1, never a hang: a
# non-NBD URI, a +unix URI without socket=, no upstream or two of them,
# port= alone, arg= before command=, a bad tls= or vsock= value, a
# refused TCP connection or missing socket with shared=true (at
# start-up), a connection timing out (connect-timeout=, against a
# listener that never answers), a command that is not a server, and a
# vsock address where nothing listens.
# Per-client mode refuses only the client.  vsock: only the parsing is
# tested here (no vsock transport in the test machine's kernel is
# assumed).
# Catches: a start-up that hangs on an unreachable upstream, a bad value
# accepted, messages that do not name the plugin.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdinfo

# bad WHAT REGEX ARGS...: "nbdkit nbd ARGS" exits 1 within the time
# limit, printing one error line from the plugin matching REGEX.
bad ()
{
  local what="$1" regex="$2" status=0
  shift 2
  timeout 20 "$NBDKIT" -U - nbd "$@" --run true 2> "$tmpdir/err" ||
    status=$?
  echo "$what: $(cat "$tmpdir/err")"
  [ "$status" = 1 ] || fail "$what: exit status $status, not 1"
  [ "$(grep -c 'error' "$tmpdir/err")" = 1 ] ||
    fail "$what: not exactly one error line"
  grep -Eq "^nbdkit: nbd(\\[[0-9]+\\])?: error: .*$regex" "$tmpdir/err" ||
    fail "$what: the message does not say: $regex"
}

port="$(free_port)"
bad "http URI" "not an NBD URI" "http://127.0.0.1/disk"
bad "unix URI without socket" "socket=PATH" "nbd+unix:///disk"
bad "no upstream" "say where the server is" export=x
bad "two upstreams" "only one" socket=/x hostname=localhost
bad "port alone" "port= goes with" port=10809 uri=nbd://localhost
bad "arg first" "arg= must come after" arg=x command=y
bad "tls" "tls= must be" socket=/x tls=maybe
bad "vsock" "vsock" vsock=two
bad "vsock port" "port" vsock=2 port=-1
bad "shared with dynamic" "dynamic-export" socket=/x shared=true \
  dynamic-export=true
bad "command not shared" "need shared=true" command=true shared=false
bad "refused" "Connection refused" hostname=127.0.0.1 port="$port" \
  shared=true
# With retry=, the failed attempts before the last are debug messages.
bad "refused twice" "Connection refused" hostname=127.0.0.1 port="$port" \
  shared=true retry=1
bad "refused URI" "Connection refused" "nbd://127.0.0.1:$port" shared=true
bad "no socket" "No such file" socket="$tmpdir/nothing" shared=true
bad "not a server" "" command=true
# Nothing listens on vsock here (and the kernel may have no local vsock
# transport at all): an error, whichever, within connect-timeout.
bad "vsock upstream" "vsock:1:12345: " vsock=1 port=12345 shared=true \
  connect-timeout=3

# A listener that accepts and never says a word.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(5)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)' "$port" &
mute=$!
cleanup_fn _kill_pid "$mute"
sleep 0.5
start=$SECONDS
bad "silent upstream" "timed out" hostname=127.0.0.1 port="$port" \
  shared=true connect-timeout=2
(( SECONDS - start < 10 )) || fail "connect-timeout=2 took too long"

# Per client: the client is refused, the server stays up.
start_server nbd hostname=127.0.0.1 port="$(free_port)"
expect_fail t nbdinfo --size "$uri" 2>/dev/null || fail "a client got through"
kill -0 "$server_pid" || fail "the server died after a refused client"
