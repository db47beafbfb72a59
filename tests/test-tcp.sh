#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TCP: -i 127.0.0.1 -p PORT listens there; --run sees $port and a
# nbd://127.0.0.1:PORT URI.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

port="$(free_port)"
"$NBDKIT" -f -i 127.0.0.1 -p "$port" -P "$tmpdir/pid" memory 1M &
pid=$!
cleanup_fn _kill_pid "$pid"
wait_for 20 -s "$tmpdir/pid" || fail "server did not start on port $port"
t nbdinfo --size "nbd://127.0.0.1:$port" | grep -qx 1048576 ||
  fail "nbd://127.0.0.1:$port does not serve 1M"
_kill_pid "$pid"

# Captive mode on TCP.
port2="$(free_port)"
t "$NBDKIT" -i 127.0.0.1 -p "$port2" memory 1M --run '
  echo "port=$port uri=$uri"
  [ "$port" = '"$port2"' ] || exit 10
  case "$uri" in nbd://*:'"$port2"'*|nbd://*:'"$port2"'/*) ;; *) exit 11 ;; esac
  nbdinfo --size "$uri"' > "$tmpdir/out"
cat "$tmpdir/out"
grep -qx 1048576 "$tmpdir/out" || fail "captive TCP server did not serve"
