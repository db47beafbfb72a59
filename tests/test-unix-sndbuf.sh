#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The send buffer of an accepted connection, as ss(8) reports it
# ("tb" in skmem): a Unix socket's is grown to what the kernel allows
# an unprivileged process for 1 MiB (twice the smaller of that and
# net.core.wmem_max), so that a large reply is not cut into pieces of
# the default 208 KiB; a TCP socket's is left to the kernel's own
# tuning (a size set by the server would be twice wmem_max's, or 2
# MiB, and fixed).  Also for a Unix socket from socket activation.
# 1 MiB reads with 8 in flight come back right.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh ss systemd-socket-activate

wmem_max="$(cat /proc/sys/net/core/wmem_max)"
want=$(( 2 * (wmem_max < 1048576 ? wmem_max : 1048576) ))
echo "wmem_max $wmem_max: want a Unix send buffer of $want bytes"

# Hold a connection open, reading 1 MiB with 8 in flight, while ss -x
# (Unix) or -t (TCP) looks at the server's end of it: its tb into
# $tmpdir/tb.
look ()
{
  t nbdsh -u "$uri" -c "
import os, re, subprocess
data = os.urandom(4 << 20)
h.pwrite(data, 0)
bufs = [nbd.Buffer(1 << 20) for i in range(8)]
for i in range(8):
    h.aio_pread(bufs[i], (i % 4) << 20)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(8):
    assert bufs[i].to_bytearray() == data[(i % 4) << 20:][:1 << 20]
out = subprocess.run(['ss', '-${1}mpn', 'state', 'established'],
                     capture_output=True, text=True, check=True).stdout
# (TCP's skmem comes on a line of its own, indented.)
out = re.sub(r'\\n\\s+', ' ', out)
tb = [m.group(1) for line in out.splitlines() if 'pid=$server_pid,' in line
      for m in [re.search(r'skmem:\\([^)]*,tb([0-9]+),', line)] if m]
print('server end of the connection: tb', tb)
assert len(tb) == 1, out
open('$tmpdir/tb', 'w').write(tb[0])
"
}

start_server memory 4M
look x
[ "$(cat "$tmpdir/tb")" = "$want" ] ||
  fail "Unix send buffer $(cat "$tmpdir/tb"), want $want"
stop_server

# The same for a Unix socket handed over by socket activation.
sock="$tmpdir/activated.sock"
systemd-socket-activate -l "$sock" \
  "$NBDKIT" -f --exit-with-parent memory 4M > "$tmpdir/log" 2>&1 &
server_pid=$!
cleanup_fn _kill_pid "$server_pid"
wait_for 10 -S "$sock" || fail "systemd-socket-activate did not listen"
uri="nbd+unix:///?socket=$sock"
look x
[ "$(cat "$tmpdir/tb")" = "$want" ] ||
  fail "activated Unix send buffer $(cat "$tmpdir/tb"), want $want"
stop_server

start_tcp_server memory 4M
look t
tb="$(cat "$tmpdir/tb")"
[ "$tb" != "$want" ] || fail "the TCP send buffer was set by the server: $tb"
stop_server
