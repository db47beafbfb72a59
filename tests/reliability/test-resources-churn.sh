#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Connections that come and go leave nothing behind.  Over four stacks
# (memory; cow and cache over memory; the nbd plugin proxying to a
# second server; file), 200 cycles of connect, write, read back, flush
# and disconnect (libnbd) after a warm-up.  Then the server's open fds
# (/proc/PID/fd) and threads (/proc/PID/task) must be back to their
# count after the warm-up, and its RSS within 1 MiB of it (a leak of
# 6 KiB per connection would show; glibc's arenas do not move that
# much once warm).  Behind the proxy the upstream server is held to the
# same.
source "$(dirname "$0")/../functions.sh"
here="$(cd "$(dirname "$0")" && pwd)"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'

# In a sanitizer build freed memory waits in AddressSanitizer's
# quarantine instead of being reused, so RSS grows with any churn; the
# leak checker at the server's exit is what catches leaks there.
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  margin=$(( 256 * 1024 ))
else
  margin=1024
fi

churn ()
{
  local label="$1"; shift
  t /usr/bin/python3 "$here/resources-libnbd.py" churn "$sock" \
    --label "$label" --cycles 200 --warmup 20 --rss-margin "$margin" "$@" ||
    fail "$label: the server did not come back to its baseline"
  kill -0 "$server_pid" || fail "$label: the server died"
  stop_server
}

start_server memory 64M
churn memory --pid "$server_pid"

start_server --filter=cow --filter=cache memory 64M
churn cow+cache --pid "$server_pid"

# The upstream of the proxy, on a socket of its own.
up_sock="$tmpdir/upstream.sock"
"$NBDKIT" -f -U "$up_sock" -P "$tmpdir/upstream.pid" memory 64M 9>&- &
up_pid=$!
cleanup_fn _kill_pid "$up_pid"
wait_for 20 -s "$tmpdir/upstream.pid" || fail "the upstream did not start"
wait_for 5 -S "$up_sock" || fail "the upstream did not create its socket"
start_server nbd socket="$up_sock"
churn nbd-proxy --pid "$server_pid" --pid "$up_pid"
_kill_pid "$up_pid"

truncate -s 64M "$tmpdir/disk.img"
start_server file "$tmpdir/disk.img"
churn file --pid "$server_pid"
