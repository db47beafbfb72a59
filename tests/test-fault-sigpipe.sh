#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# SIGPIPE never kills the server.  Clients ask for 32 MiB reads and
# hang up (with a reset) while the replies are being sent: on a Unix
# socket, and with -s on pipes, where the server's write to a pipe
# nobody reads raises SIGPIPE for real.  The server must carry on
# serving (the socket case) or finish cleanly with status 0 (-s).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh python3

client="$srcdir/fault-client.py"

start_server memory 64M
t python3 "$client" big-read "$sock" 4 5 ||
  fail "the rude client failed before it could hang up"
kill -0 "$server_pid" || fail "the server died after clients hung up"
t nbdsh -u "$uri" -c '
h.pwrite(b"alive", 0)
assert h.pread(5, 0) == b"alive"
' || fail "the server stopped serving after clients hung up"
stop_server

# -s: the reply goes out with writev on a pipe; the read end closes.
status="$(t python3 "$client" stdio-big-read "$NBDKIT" memory 64M)" ||
  fail "stdio client failed"
echo "-s server exit status: $status"
[ "$status" = 0 ] ||
  fail "-s server exited with $status (negative: killed by that signal)"
