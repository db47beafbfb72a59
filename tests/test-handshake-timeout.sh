#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --handshake-timeout bounds the whole negotiation: a client that sends
# one byte every 100 ms (never finishing its flags, then its options) is
# disconnected after the timeout however slowly it drips, while a
# well-behaved client connecting meanwhile is served.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

start_server --handshake-timeout=1 memory 1M

# The dripping client: reads the greeting, then sends a byte every
# 100 ms for at most 8 s, reporting when the server hangs up.
t /usr/bin/python3 - "$sock" > "$tmpdir/drip" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
start = time.monotonic()
greeting = b""
while len(greeting) < 18:
    greeting += s.recv(18 - len(greeting))
# Valid flags, then an NBD_OPT_INFO header promising 1000 bytes of
# payload, which arrive one at a time: never a complete message.
junk = (b"\x00\x00\x00\x03" + b"IHAVEOPT" + (6).to_bytes(4, "big")
        + (1000).to_bytes(4, "big") + b"\x00" * 1000)
for b in junk:
    try:
        s.send(bytes([b]))
    except OSError:
        break
    s.settimeout(0.1)
    try:
        if s.recv(1) == b"":
            break
    except socket.timeout:
        pass
    if time.monotonic() - start > 8:
        print("still connected after 8 s")
        sys.exit(0)
print("closed after %.1f s" % (time.monotonic() - start))
PY
drip=$!

# Meanwhile a good client is served.
sleep 0.3
[ "$(t nbdinfo --size "$uri")" = 1048576 ] || fail "good client not served"

wait "$drip" || fail "the dripping client failed"
cat "$tmpdir/drip"
secs=$(sed -n 's/^closed after \([0-9.]*\) s$/\1/p' "$tmpdir/drip")
[ -n "$secs" ] || fail "the server never dropped the dripping client"
# Dropped at the 1 s timeout, with generous room for a busy machine.
awk -v s="$secs" 'BEGIN { exit !(s >= 0.9 && s < 6) }' ||
  fail "dropped after $secs s, expected about 1 s"

# The default leaves a normal client alone.
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0); assert h.pread(512, 0) == b"x" * 512'
