#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# With --filter=retry in front of the nbd plugin, nbdcopy completes and
# its copy is right although the upstream (our own server, then
# qemu-nbd) is killed with SIGKILL and restarted twice during the copy:
# the filter reopens the plugin, whose connection attempts (retry=)
# wait for the upstream to return, and repeats the failed requests.
# The rate filter under the retry filter (2 MB/s, bursts of 0.2 s,
# so an outage does not buy a burst) makes the 4 MiB copy last
# about 2 s, so that both outages fall inside it (checked).
# Catches: a reopen that never reconnects, a retried read that returns
# wrong bytes or none, a copy that fails although the upstream came
# back, a proxy that dies with its upstream.
source "$(dirname "$0")/../functions.sh"
requires_cmd nbdcopy qemu-nbd cmp

disk="$tmpdir/disk"
head -c 4M /dev/urandom > "$disk"
up_sock="$tmpdir/up.sock"

# upstream_start KIND: our server or qemu-nbd on $up_sock, pid $up_pid.
upstream_start ()
{
  rm -f "$up_sock" "$tmpdir/up.pid"
  case $1 in
    nbdkit)
      "$NBDKIT" -f -U "$up_sock" -P "$tmpdir/up.pid" file "$disk" 9>&- &
      up_pid=$!
      wait_for 20 -s "$tmpdir/up.pid" || fail "the upstream did not start" ;;
    qemu-nbd)
      qemu-nbd -f raw -t -k "$up_sock" "$disk" 9>&- &
      up_pid=$!
      wait_for 20 -S "$up_sock" || fail "qemu-nbd did not start" ;;
  esac
  cleanup_fn _kill_pid "$up_pid"
}

for up in nbdkit qemu-nbd; do
  echo "== upstream: $up"
  upstream_start $up
  start_server --filter=retry --filter=rate nbd socket="$up_sock" retry=20 \
    rate=16M burstiness=0.2 retries=10 retry-delay=1 retry-exponential=no
  rm -f "$tmpdir/copy"
  start=$SECONDS
  t nbdcopy "$uri" "$tmpdir/copy" 2> "$tmpdir/copy.err" &
  copy=$!
  for outage in 1 2; do
    sleep 0.6
    kill -0 "$copy" 2>/dev/null ||
      fail "the copy ended before outage $outage"
    kill -9 "$up_pid"
    wait "$up_pid" 2>/dev/null || :
    sleep 0.6
    upstream_start $up
  done
  wait "$copy" || { cat "$tmpdir/copy.err"; fail "the copy failed ($up)"; }
  cmp "$disk" "$tmpdir/copy" || fail "the copy's bytes are wrong ($up)"
  kill -0 "$server_pid" || fail "the proxy died"
  echo "$up: nbdcopy of 4 MiB complete and right across 2 upstream kills" \
    "in $(( SECONDS - start )) s"
  stop_server
  _kill_pid "$up_pid"
  wait "$up_pid" 2>/dev/null || :
done
