#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The socket probes over TLS: reads and writes go through the TLS
# session (crypto.c) once STARTTLS is done, and must still fire
# sock_read_start/done and sock_write_start/done for the connection, in
# pairs, with the writes adding up to connection_close's bytes out (the
# plaintext the server wrote), and reply_written for the read.  Would
# catch: a TLS path that bypasses the probes.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh psktool certtool
requires_root
requires_probes
assert_tls_build
tracing_lock

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
start_server --tls=require --tls-psk="$tmpdir/tls/keys.psk" memory 1M
b="$server_binary"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:tls_handshake_done { printf(\"%llu tls %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:reply_written { printf(\"%llu written %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg4); }
usdt:$b:nbdkit:sock_read_start { printf(\"%llu rstart %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:sock_read_done { printf(\"%llu rdone %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3); }
usdt:$b:nbdkit:sock_write_start { printf(\"%llu wstart %d %d\n\", nsecs, arg0, arg1); }
usdt:$b:nbdkit:sock_write_done { printf(\"%llu wdone %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3); }
usdt:$b:nbdkit:connection_close { printf(\"%llu close %d %d %d\n\", nsecs, arg0, arg3, arg4); }"

t nbdsh -c 'h.set_uri_allow_local_file(True)' \
  -c "h.connect_uri('nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/tls/keys.psk')" \
  -c 'assert h.get_tls_negotiated()' \
  -c 'h.pread(4096, 0)' -c 'h.shutdown()'
trace_stop_at_close

id="$(awk '$1 == "tls" && $3 == 1 { print $2; exit }' "$tmpdir/got")"
[ -n "$id" ] || fail "no successful TLS handshake"
# After the TLS handshake: reads and writes of the session.
awk -v id="$id" '
  $2 != id { next }
  $1 == "tls" { tls = 1; next }
  $1 == "rstart" && tls { rs++ }
  $1 == "rdone" && tls { rd++ }
  $1 == "wstart" && tls { ws++ }
  $1 == "wdone" { wd++; if ($3 < 0) bad = 1; wout += $3 }
  $1 == "written" && $4 > 4096 && $5 == 1 { w = 1 }
  $1 == "close" { bout = $4 }
  END {
    printf "after TLS: reads %d/%d, writes %d; %d bytes written, %d out\n",
      rs, rd, ws, wout, bout
    exit !(!bad && rs > 0 && rs == rd && ws > 0 && wout == bout && w)
  }' "$tmpdir/got" || fail "the socket probes miss the TLS session's I/O"
