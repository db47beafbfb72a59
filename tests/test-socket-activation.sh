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

# --run is refused under socket activation: the command could not be
# told where the activated socket is.  (LISTEN_PID must be the server's
# own pid: sh's, kept through exec.)
if LISTEN_FDS=1 sh -c 'LISTEN_PID=$$ exec "$0" memory 1M --run true' \
     "$NBDKIT" 2> "$tmpdir/err"; then
  fail "--run accepted under socket activation"
fi
cat "$tmpdir/err"
grep -q -- '--run cannot be used with socket activation' "$tmpdir/err" ||
  fail "no clear refusal of --run under socket activation"
