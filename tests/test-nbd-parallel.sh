#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Requests stay parallel on one upstream connection: with shared=true,
# 8 clients each send a read at the same time over the plugin's single
# upstream connection; the upstream holds each read 2 s, so they finish
# in about 2 s if the plugin keeps them all in flight, 16 s if it sends
# them one at a time.  The upstream is Debian's nbdkit with its delay
# filter (its 16 threads serve a connection's requests side by side
# from the first; our server's pool starts with one worker per
# connection and grows as slow requests come, which would hide what is
# measured here).
# Catches: requests serialised on the upstream connection (a lock held
# across the wait, a synchronous libnbd call).
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdsh
debian_nbdkit=/usr/sbin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/bin/nbdkit
requires test -x "$debian_nbdkit"
requires "$debian_nbdkit" -U - --filter=delay null --run true

up_sock="$tmpdir/up.sock"
"$debian_nbdkit" -f -U "$up_sock" -P "$tmpdir/up.pid" --filter=delay \
  memory 1M delay-read=2 9>&- &
up_pid=$!
cleanup_fn _kill_pid "$up_pid"
wait_for 20 -s "$tmpdir/up.pid" || fail "Debian's nbdkit did not start"

start_server nbd socket="$up_sock" shared=true
start=$SECONDS
clients=()
for i in $(seq 8); do
  t nbdsh -u "$uri" -c "h.pread(4096, $i * 4096)" &
  clients+=($!)
done
for c in "${clients[@]}"; do
  wait "$c" || fail "a client's read failed"
done
took=$(( SECONDS - start ))
echo "8 reads of 2 s over one upstream connection took $took s"
(( took < 8 )) || fail "the reads were serialised ($took s)"
