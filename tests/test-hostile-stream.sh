#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hostile byte streams in the transmission phase (tests/hostile-client.py,
# group "stream"): writes whose payload never arrives (closed, reset or
# stalled mid-payload: nothing may be written), cut headers, oversized
# writes (thrown away with ENOMEM up to 128 MiB, the connection cut
# beyond, as nbdkit does), 2000 pipelined requests (all answered once;
# or cut by a reset), half-close, DISC with its fields set followed by
# more data, duplicate cookies, bad magic mid-stream, unread replies
# (the memory they pin stays bounded).
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3
# In a sanitizer build ASan's quarantine keeps up to 256 MiB of freed
# memory resident: it would count as what the unread reads pin.
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
fi

start_server memory 256M
t /usr/bin/python3 "$srcdir/hostile-client.py" "$sock" "$server_pid" stream
kill -0 "$server_pid" || fail "the server died"

# Requests that sleep make the worker pool grow, so that sixteen 64 MiB
# reads run side by side: what they hold must stay bounded.
stop_server
start_server --filter=delay memory 256M rdelay=100ms
t /usr/bin/python3 "$srcdir/hostile-client.py" "$sock" "$server_pid" stream \
  --case unread-large-reads-bounded
kill -0 "$server_pid" || fail "the server died"
