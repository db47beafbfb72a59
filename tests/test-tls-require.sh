#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The STARTTLS rules, checked with a raw client (tls-raw-client.py):
# under --tls=require nothing but STARTTLS and ABORT is answered in the
# clear and no export data moves; state negotiated before STARTTLS is
# dropped (the CVE-2021-3716 lesson); plaintext injected behind
# STARTTLS ends the connection; the handshake timeout drops a TLS
# client that stays silent or drips its hello a byte at a time, and
# garbage instead of a hello ends the connection; --tls=on serves both
# kinds of client and the plugin's is_tls tells them apart; --tls=off
# refuses STARTTLS.  Plus libnbd refused in the clear.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
raw () { t /usr/bin/python3 "$srcdir/tls-raw-client.py" "$sock" "$d/client" "$@"; }

start_server --tls=require --tls-certificates="$d/server" \
  --handshake-timeout=2 memory 1M
raw require-refuses-clear
raw silent-after-starttls
raw garbage-hello
raw drip-hello
# libnbd in the clear gets nothing.
if t nbdinfo "nbd+unix:///?socket=$sock" >"$tmpdir/clear.out" 2>&1; then
  fail "a plaintext client was served under --tls=require"
fi
cat "$tmpdir/clear.out"
kill -0 "$server_pid" || fail "server died"
t nbdinfo "nbds+unix:///?socket=$sock&tls-certificates=$d/client" >/dev/null
stop_server

start_server --tls=on --tls-certificates="$d/server" \
  "$abs_builddir/.libs/tls-info-plugin.so"
raw on-allows-clear
raw state-reset
raw data-after-starttls
[ "$(t nbdsh -u "nbd+unix:///plain?socket=$sock" \
      -c 'print(h.pread(5, 0).decode())')" = "tls=0" ] ||
  fail "plugin saw TLS on a plaintext connection"
stop_server

start_server memory 1M
raw off-refuses-starttls
