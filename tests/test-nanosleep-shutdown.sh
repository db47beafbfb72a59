#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit_nanosleep gives up when there is no point in sleeping on: a
# server asked to stop does not wait out a filter's 60 s delay of a
# read in flight, and delay-close holds a client that disconnects with
# NBD_CMD_DISC but not one that is cut off (killed).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

# SIGTERM while a read sleeps for 60 s: the server is gone within 10 s.
start_server --filter=delay memory 1M delay-read=60
nbdsh -u "$uri" -c 'h.pread(512, 0)' > /dev/null 2>&1 &
client=$!
cleanup_fn _kill_pid "$client"
sleep 1
start=$SECONDS
kill -TERM "$server_pid"
wait_for 10 ! -e "/proc/$server_pid" ||
  fail "the server still runs 10 s after SIGTERM, sleeping in a read"
echo "stopped in $(( SECONDS - start )) s"
wait "$client" && fail "the delayed read succeeded after shutdown"
server_pid=

# delay-close=4: a client that sends NBD_CMD_DISC (h.shutdown) waits for
# its close; one that is killed does not hold the server up.
start_server --filter=delay memory 1M delay-close=4
start=$(date +%s%N)
t nbdsh -u "$uri" -c 'h.pread(512, 0); h.shutdown()' ||
  fail "graceful client failed"
# The server closes the socket only after the close callbacks, and
# libnbd's shutdown waits for that: the client itself takes the delay.
stop_server
graceful=$(( ($(date +%s%N) - start) / 1000000 ))
echo "graceful: ${graceful} ms"
[ "$graceful" -ge 3500 ] || fail "delay-close did not delay a graceful close"

start_server --filter=delay memory 1M delay-close=4
start=$(date +%s%N)
nbdsh -u "$uri" -c 'h.pread(512, 0); import os, signal; os.kill(os.getpid(), signal.SIGKILL)' ||
  :
stop_server
abrupt=$(( ($(date +%s%N) - start) / 1000000 ))
echo "abrupt: ${abrupt} ms"
[ "$abrupt" -lt 3500 ] || fail "delay-close delayed a client that was cut off"
