#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The project's hostile client (tests/hostile-client.py: the handshake,
# requests and stream groups of tests/test-hostile-*.sh) against
#   --filter=retry nbd socket=UPSTREAM
# where UPSTREAM is a second server of ours (memory 256M) on a Unix
# socket: nothing the hostile client sends may reach the upstream server
# in a form that breaks it or the proxy.  Every case must pass as it
# does against the memory plugin; both servers must stay up; the proxy
# must serve correct bytes afterwards, and the upstream server must hold
# them too (read directly).
source "$(dirname "$0")/../functions.sh"
requires test -x /usr/bin/python3
requires /usr/bin/python3 -c 'import nbd'
source "$(dirname "$0")/hostile-stacks.sh"

up="$tmpdir/up.sock"
"$NBDKIT" -f -U "$up" -P "$tmpdir/up.pid" memory 256M 9>&- &
up_pid=$!
cleanup_fn _kill_pid "$up_pid"
wait_for 20 -s "$tmpdir/up.pid" || fail "the upstream server did not start"

start_server --filter=retry nbd socket="$up"
hostile_groups
serves_correctly "$uri" write
kill -0 "$server_pid" || fail "the proxy died"
kill -0 "$up_pid" || fail "the upstream server died"
serves_correctly "nbd+unix:///?socket=$up" verify
