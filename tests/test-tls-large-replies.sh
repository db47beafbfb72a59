#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Large transfers over TLS take few system calls.  GnuTLS pushes each
# 16 KiB record on its own, and reads each record in two pieces; the
# server batches the records of a reply larger than 64 KiB into sends
# of up to 256 KiB (tls_sendv) and reads the socket 256 KiB at a time
# (transport_pull).  Over TLS (PSK and X.509, structured replies or
# not), 24 MiB of writes then 20 MiB of reads (16 of 1 MiB, one of
# 4 MiB + 3, bigger than the batch, with small reads and a flush in
# between) must give the right bytes in at most 8 sendmsg calls per MiB
# read (one per record would be 64; measured without the batching:
# 1342) and 40 read calls per MiB written (two per record would be 128;
# measured without the read-ahead: 131 per MiB; with it about 18, as
# the socket rarely holds 256 KiB when read).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh strace psktool certtool

bash "$abs_top_srcdir/tests/make-tls-files.sh" "$tmpdir/tls"

cat > "$tmpdir/check.py" <<'PY'
MiB = 1024 * 1024
h.pwrite(bytes(range(256)) * (24 * MiB // 256), 0)
h.flush()
for i in range(16):
    off = (i % 8) * MiB + 512 * i
    got = h.pread(MiB, off)
    assert got == (bytes(range(256)) * (MiB // 256 + 4))[off % 256:off % 256 + MiB], i
    assert h.pread(512, off) == got[:512]
big = h.pread(4 * MiB + 3, 5)
assert big == (bytes(range(256)) * (4 * MiB // 256 + 2))[5:5 + 4 * MiB + 3]
print("ok")
PY

# run_traced OUT SR QUERY TLS-ARGS...: the server under strace -f
# (sendmsg only; LeakSanitizer cannot run under ptrace: off for these
# runs only), the client outside it, so only the server's calls count.
run_traced ()
{
  local out="$1" sr="$2" query="$3" spid st=0
  shift 3
  local sock="$tmpdir/sock" pidfile="$tmpdir/server.pid"
  rm -f "$sock" "$pidfile"
  env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=sendmsg,read -o "$out" \
    "$NBDKIT" -f -U "$sock" -P "$pidfile" --tls=require "$@" memory 32M 9>&- &
  spid=$!
  cleanup_fn _kill_pid "$spid"
  wait_for 20 -s "$pidfile" || fail "the server did not start: $*"
  cleanup_fn _kill_pid "$(cat "$pidfile")"
  timeout 120 nbdsh -c "h.set_request_structured_replies($sr)" \
    -c 'h.set_uri_allow_local_file(True)' \
    -c "h.connect_uri('nbds+unix://alice@/?socket=$sock&$query')" \
    -c "exec(open('$tmpdir/check.py').read())" || st=$?
  kill "$(cat "$pidfile")"
  wait "$spid" 2>/dev/null || :
  return $st
}

for sr in True False; do
  for kind in psk x509; do
    if [ $kind = psk ]; then
      args=(--tls-psk="$tmpdir/tls/keys.psk")
      query="tls-psk-file=$tmpdir/tls/keys.psk"
    else
      args=(--tls-certificates="$tmpdir/tls/server")
      query="tls-certificates=$tmpdir/tls/client"
    fi
    run_traced "$tmpdir/strace-$kind-$sr" "$sr" "$query" "${args[@]}" ||
      fail "TLS $kind (structured replies $sr): the reads were wrong"
    # 16 MiB + 4 MiB of large replies: at most 8 calls per MiB, plus
    # the handshake, the small replies, the write and the flush.
    calls="$(grep -c 'sendmsg(' "$tmpdir/strace-$kind-$sr" || :)"
    echo "TLS $kind, structured replies $sr: $calls sendmsg calls"
    [ "$calls" -le $(( 20 * 8 + 60 )) ] ||
      fail "TLS $kind: $calls sendmsg calls for 20 MiB of replies (records not batched)"
    reads="$(grep -c 'read(' "$tmpdir/strace-$kind-$sr" || :)"
    echo "TLS $kind, structured replies $sr: $reads read calls"
    [ "$reads" -le $(( 24 * 40 + 60 )) ] ||
      fail "TLS $kind: $reads read calls for 24 MiB of writes (no read-ahead)"
  done
done
