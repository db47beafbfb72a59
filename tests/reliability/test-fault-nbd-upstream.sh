#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin as a proxy whose upstream (our own server, then
# qemu-nbd) is killed with SIGKILL and restarted while a client reads
# (fault-reader.py drives it and checks every read):
#  - reads in flight when the upstream dies, and every read after,
#    fail with EIO: no hang (each read answers within 10 s), no other
#    error, and no read that succeeds returns wrong bytes;
#  - a client connecting while the upstream is down is refused at once;
#  - the proxy stays up, and once the upstream is back a new client
#    reads the whole export right, and so again after a second outage.
# The client that was connected during the outage keeps getting EIO,
# not wrong bytes: without the retry filter the plugin does not
# reconnect an open connection (nbdkit-nbd-plugin(1), retry=), which
# test-fault-nbd-retry.sh covers.
# Catches: requests left waiting on a dead upstream, a proxy that dies
# with its upstream or never reconnects, errors other than EIO, stale
# or misplaced data served after a reconnect.
source "$(dirname "$0")/../functions.sh"
requires /usr/bin/python3 -c 'import nbd'
requires_cmd qemu-nbd
reader="$(cd "$(dirname "$0")" && pwd)/fault-reader.py"

disk="$tmpdir/disk"
head -c 8M /dev/urandom > "$disk"
up_sock="$tmpdir/up.sock"

for up in nbdkit qemu-nbd; do
  echo "== upstream: $up"
  case $up in
    nbdkit)
      upcmd="$NBDKIT -f -U $up_sock -P $tmpdir/up.pid file $disk"
      ready="$tmpdir/up.pid" ;;
    qemu-nbd)
      upcmd="qemu-nbd -f raw -t -k $up_sock $disk"
      ready="$up_sock" ;;
  esac
  start_server nbd socket="$up_sock"
  t /usr/bin/python3 "$reader" --sock "$sock" --disk "$disk" \
    --pid "$server_pid" --upstream "$upcmd" --upstream-ready "$ready" \
    up-start connect:a read:a:ok:50 \
    read-during:a:up-kill read:a:eio:20 connect-fails alive \
    up-start connect:b read:b:ok:50 whole:b read:a:any:10 \
    up-kill read:b:eio:10 connect-fails alive \
    up-start connect:c whole:c alive > "$tmpdir/out" ||
    { cat "$tmpdir/out"; fail "upstream $up"; }
  cat "$tmpdir/out"
  tail -1 "$tmpdir/out" | sed "s/^/$up /" >> "$tmpdir/figures"
  stop_server
done
cat "$tmpdir/figures"
