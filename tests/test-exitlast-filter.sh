#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=exitlast: the server waits for its first client however
# long, is not stopped by a client that only lists exports, stays up
# while any client is connected, and exits with status 0 when the last
# one leaves; the data a client wrote was flushed by then.  Debian's
# nbdkit does the same for the same clients.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

# exits_within PID SECONDS: the server has gone (and exited 0).
exits_within ()
{
  local i
  for (( i = 0; i < $2 * 10; i++ )); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  ! kill -0 "$1" 2>/dev/null || return 1
  wait "$1"
}

for server in "$NBDKIT" /usr/bin/nbdkit; do
  [ -x "$server" ] || continue
  disk="$tmpdir/disk.img"
  truncate -s 1M "$disk"
  sock="$tmpdir/sock"
  uri="nbd+unix:///?socket=$sock"
  rm -f "$sock" "$tmpdir/pid" "$tmpdir"/*.up "$tmpdir"/*.go
  "$server" -f -U "$sock" -P "$tmpdir/pid" --filter=exitlast file "$disk" &
  pid=$!
  cleanup_fn _kill_pid "$pid"
  wait_for 20 -s "$tmpdir/pid" || fail "$server did not start"

  # No client yet: it waits.
  sleep 1
  kill -0 "$pid" || fail "$server exited before its first client"
  # Listing exports (no export opened) does not count.
  t nbdsh -c "
h.set_opt_mode(True)
h.connect_uri('$uri')
h.opt_list(lambda n, d: 0)
h.opt_abort()
"
  sleep 0.5
  kill -0 "$pid" || fail "$server exited after a client that only listed"

  # Client a stays; client b comes and goes; the server stays for a.
  nbdsh -u "$uri" -c "
import os, time
h.pwrite(b'written by a', 4096)
open('$tmpdir/a.up', 'w').close()
for i in range(300):
    if os.path.exists('$tmpdir/a.go'):
        break
    time.sleep(0.1)
" &
  cleanup_fn _kill_pid $!
  wait_for 20 -f "$tmpdir/a.up" || fail "client a did not connect"
  t nbdinfo --size "$uri" > /dev/null
  sleep 0.5
  kill -0 "$pid" || fail "$server exited while client a was connected"

  # a leaves: the server exits, status 0, a's write in the file.
  touch "$tmpdir/a.go"
  exits_within "$pid" 20 || fail "$server did not exit 0 after the last client"
  [ "$(dd if="$disk" bs=1 skip=4096 count=12 status=none)" = "written by a" ] ||
    fail "client a's write is not in the file"
  echo "$server: exited after the last client"
done
