#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# retry=: the upstream may come up after the client (or, with
# shared=true, after the server) started; and with the retry filter a
# copy survives the upstream being killed and restarted half-way: the
# filter reopens the plugin, whose connection attempts (retry=) wait for
# the upstream to be back, and the bytes copied are right.
# Catches: retry= ignored (the first refused connection is final), a
# reopen that never reconnects, a retried request reading wrong bytes.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdinfo nbdcopy

head -c 8M /dev/urandom > "$tmpdir/disk"
up_sock="$tmpdir/up.sock"

echo "== the upstream comes up after the client connected"
start_server nbd socket="$up_sock" retry=20
t nbdinfo --size "$uri" > "$tmpdir/size" 2> "$tmpdir/size.err" &
client=$!
sleep 2
kill -0 "$client" 2>/dev/null || { cat "$tmpdir/size.err";
  fail "the client did not wait for the upstream"; }
start_upstream file "$tmpdir/disk"
wait "$client" || { cat "$tmpdir/size.err"; fail "the client failed"; }
[ "$(cat "$tmpdir/size")" = 8388608 ] || fail "wrong size"
stop_server
stop_upstream

echo "== shared=true: the upstream comes up after the server started"
( sleep 2; "$NBDKIT" -f -U "$up_sock" -P "$tmpdir/late.pid" \
    file "$tmpdir/disk" 9>&- ) &
late=$!
cleanup_fn _kill_pid "$late"
[ "$(t "$NBDKIT" -U - nbd socket="$up_sock" shared=true retry=20 \
       --run 'nbdinfo --size "$uri"')" = 8388608 ] ||
  fail "shared=true with retry=: no connection"
_kill_pid "$(cat "$tmpdir/late.pid")"
wait "$late" || :

echo "== the upstream is killed and restarted during a copy"
# The rate filter makes the 8 MiB copy last about 4 s.
up_args=(--filter=rate file "$tmpdir/disk" rate=16M)
start_upstream "${up_args[@]}"
start_server --filter=retry nbd socket="$up_sock" retry=20 retry-delay=1 \
  retry-exponential=no
t nbdcopy --request-size=262144 --connections=1 "$uri" "$tmpdir/copy" \
  2> "$tmpdir/copy.err" &
copy=$!
sleep 1.5
kill -0 "$copy" 2>/dev/null || fail "the copy ended before the upstream died"
kill -9 "$up_pid"
wait "$up_pid" 2>/dev/null || :
sleep 1.5
start_upstream "${up_args[@]}"
wait "$copy" || { cat "$tmpdir/copy.err"; fail "the copy failed"; }
cmp "$tmpdir/disk" "$tmpdir/copy" || fail "the copy's bytes are wrong"
