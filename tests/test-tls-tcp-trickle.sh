#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Over TLS on TCP, write payloads whose last bytes come late and in
# small records.  tls-trickle-client.py writes payloads of awkward sizes
# (129 KiB + 7 to 2 MiB + 3) to the memory plugin (payloads land in its
# pages, conn_recvv) and to the file plugin (into the worker's buffer,
# conn_recv), and reads each back.  A read path that waits for more
# than the client owes leaves a write unanswered: a low mark on the
# socket set 20000 bytes too high, tried while measuring the mark for
# TLS (bench/HISTORY.md), failed the first case.
source "$(dirname "$0")/functions.sh"
requires_cmd certtool

bash "$abs_top_srcdir/tests/make-tls-files.sh" "$tmpdir/tls"
truncate -s 16M "$tmpdir/disk"

for plugin in "memory 16M" "file $tmpdir/disk"; do
  start_tcp_server --tls=require --tls-certificates="$tmpdir/tls/server" \
    $plugin
  timeout 120 /usr/bin/python3 "$srcdir/tls-trickle-client.py" "$port" \
    "$tmpdir/tls/client" || fail "$plugin: the trickled writes failed"
  stop_server
done
