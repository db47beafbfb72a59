#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile numbers of connections (tests/hostile-client.py, group
# "connections"), each against its own server:
#   1000 idle connections (below the default --max-connections 1024)
#     while a good client is served; threads and fds go back down after;
#   a burst of 40 on --max-connections 16: at most 16 served;
#   clients dripping one byte every 100 ms: dropped by
#     --handshake-timeout 2;
#   more clients than the server has file descriptors: no busy loop on
#     accept, and service resumes once they go.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3

# The client and the server each need over 1000 descriptors.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 4096 ]; then
  ulimit -n 4096 2>/dev/null || :
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 2100 ]; then
  echo "$0: SKIP: cannot raise the open files limit to 2100"
  exit 77
fi

hostile="$srcdir/hostile-client.py"

start_server memory 256M
t /usr/bin/python3 "$hostile" "$sock" "$server_pid" connections \
  --case idle-1000
kill -0 "$server_pid" || fail "the server died"
stop_server

start_server --max-connections 16 memory 256M
t /usr/bin/python3 "$hostile" "$sock" "$server_pid" connections \
  --case connection-limit --max-connections 16
kill -0 "$server_pid" || fail "the server died"
stop_server

start_server --handshake-timeout 2 memory 256M
t /usr/bin/python3 "$hostile" "$sock" "$server_pid" connections \
  --case drip-feed --handshake-timeout 2
kill -0 "$server_pid" || fail "the server died"
stop_server

# The client lowers this server's descriptor limit to 64 (setrlimit on
# another process of the same user) and opens 200 connections.
start_server memory 256M 2>"$tmpdir/fd-exhaustion.log"
t /usr/bin/python3 "$hostile" "$sock" "$server_pid" connections \
  --case fd-exhaustion --fd-limit 64 --fd-flood 200
kill -0 "$server_pid" || fail "the server died"
stop_server
# Running out of descriptors is reported, but not once per attempt.
lines=$(grep -c 'accept' "$tmpdir/fd-exhaustion.log" || :)
echo "accept errors logged: $lines"
[ "$lines" -le 50 ] || fail "$lines accept errors logged"
