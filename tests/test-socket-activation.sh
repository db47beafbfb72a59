#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Socket activation (LISTEN_PID/LISTEN_FDS): systemd-socket-activate
# listens on a Unix socket and hands it to the server on the first
# connection.
source "$(dirname "$0")/functions.sh"
requires_cmd systemd-socket-activate nbdsh

sock="$tmpdir/sock"
# --exit-with-parent: the server goes when systemd-socket-activate goes.
systemd-socket-activate -l "$sock" \
  "$NBDKIT" -f --exit-with-parent memory 1M > "$tmpdir/log" 2>&1 &
pid=$!
cleanup_fn _kill_pid "$pid"
wait_for 10 -S "$sock" || fail "systemd-socket-activate did not listen"
t nbdsh -u "nbd+unix:///?socket=$sock" -c - <<'PY'
assert h.get_size() == 1048576
h.pwrite(b"activated", 0)
assert h.pread(9, 0) == b"activated"
PY
# A second connection reaches the same server (data persists).
t nbdsh -u "nbd+unix:///?socket=$sock" -c 'assert h.pread(9, 0) == b"activated"'
cat "$tmpdir/log"
