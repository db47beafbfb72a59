#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile byte streams in the transmission phase (tests/hostile-client.py,
# group "stream"): writes whose payload never arrives (closed, reset or
# stalled mid-payload: nothing may be written), cut headers, oversized
# writes, 2000 pipelined requests (all answered once; or cut by a reset),
# half-close, DISC with its fields set followed by more data, duplicate
# cookies, bad magic mid-stream, unread replies.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3

start_server memory 64M
t /usr/bin/python3 "$srcdir/hostile-client.py" "$sock" "$server_pid" stream
kill -0 "$server_pid" || fail "the server died"
