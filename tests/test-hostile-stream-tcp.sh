#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The hostile byte streams of test-hostile-stream.sh again, over TCP on
# 127.0.0.1.  Over TCP the server reads large write payloads its own way
# (it tells the kernel how many bytes it waits for, SO_RCVLOWAT), so
# payloads that are cut, reset, stalled, dripped or of awkward sizes
# must be checked there too.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3

start_tcp_server memory 256M
t /usr/bin/python3 "$srcdir/hostile-client.py" "tcp:127.0.0.1:$port" \
  "$server_pid" stream
kill -0 "$server_pid" || fail "the server died"
