#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The upstream dies during a copy and there is no retry: the client
# gets EIO (not a hang, not a crash), the server stays up, a client
# connecting while the upstream is down is refused at once, and once
# the upstream is back new clients work again.
# Catches: requests in flight left waiting forever when the upstream
# dies, a dead upstream taking the server down, an error code that is
# not EIO, a server that never reconnects, a request waiting for ever
# on an upstream that stopped answering.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdinfo nbdcopy nbdsh

head -c 8M /dev/urandom > "$tmpdir/disk"
up_args=(--filter=rate file "$tmpdir/disk" rate=16M)
start_upstream "${up_args[@]}"
start_server nbd socket="$up_sock"

# A client that reads until the upstream dies, and reports the errno.
t nbdsh -u "$uri" -c '
import sys
try:
    for off in range(0, 8 * 1024 * 1024, 262144):
        h.pread(262144, off)
    print("no error")
except nbd.Error as e:
    print(e.errno)
' > "$tmpdir/errno" 2>&1 &
client=$!
sleep 1.5
kill -0 "$client" 2>/dev/null || fail "the reads ended before the upstream died"
kill -9 "$up_pid"
wait "$up_pid" 2>/dev/null || :
wait "$client" || :
cat "$tmpdir/errno"
[ "$(tail -1 "$tmpdir/errno")" = EIO ] || fail "the client did not get EIO"

kill -0 "$server_pid" || fail "the server died with its upstream"
# While the upstream is down: refused at once, not hung.
expect_fail timeout 10 nbdinfo --size "$uri" 2>/dev/null ||
  fail "a client connected while the upstream was down"

start_upstream "${up_args[@]}"
[ "$(t nbdinfo --size "$uri")" = 8388608 ] ||
  fail "no new connection once the upstream was back"
cmp <(t nbdcopy "$uri" -) "$tmpdir/disk" || fail "wrong bytes after restart"

# An upstream that stops answering (the delay filter holds reads for
# 30 s): with request-timeout=1 the client gets EIO within seconds and
# the server stays up.
stop_server
stop_upstream
start_upstream --filter=delay file "$tmpdir/disk" delay-read=30
start_server nbd socket="$up_sock" request-timeout=1
start=$SECONDS
t nbdsh -u "$uri" -c '
try:
    h.pread(512, 0)
    print("no error")
except nbd.Error as e:
    print(e.errno)
' > "$tmpdir/errno" 2>&1
cat "$tmpdir/errno"
[ "$(tail -1 "$tmpdir/errno")" = EIO ] || fail "a silent upstream: no EIO"
(( SECONDS - start < 10 )) || fail "request-timeout=1 took $((SECONDS - start)) s"
kill -0 "$server_pid" || fail "the server died after a request timed out"
