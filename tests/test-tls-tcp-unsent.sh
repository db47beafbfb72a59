#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Over TLS on TCP the server keeps at most 64 KiB of its replies unsent
# in the socket (TCP_NOTSENT_LOWAT, crypto.c limit_unsent): the rest
# waits in the server until the client's window opens, so the server,
# not a slower client's ACKs, pays for sending it.  A client asks for
# 32 MiB of reads and does not read (sampled for 1.5 s): `ss` must show
# the server's socket with some, but no more than 64 KiB, unsent (plus
# one segment the kernel may add past the mark; without the limit it
# held 4100096 bytes), and every byte must then arrive right.  Plain
# TCP is not limited (the choice bench/HISTORY.md records): there the
# same stall leaves more than 1 MiB unsent.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh ss psktool certtool

bash "$abs_top_srcdir/tests/make-tls-files.sh" "$tmpdir/tls"

cat > "$tmpdir/check.py" <<'PY'
import re, subprocess, sys, time
MiB = 1024 * 1024
pattern = bytes(range(256)) * (4 * MiB // 256)
for i in range(8):
    h.pwrite(pattern, i * 4 * MiB)
bufs = [nbd.Buffer(4 * MiB) for i in range(8)]
cookies = [h.aio_pread(bufs[i], i * 4 * MiB) for i in range(8)]
# The most the server's socket holds unsent while we do not read,
# sampled every 0.1 s: for 1.5 s and until something is unsent, or
# (plain TCP) until it passes 1 MiB, for at most 20 s (a slow,
# instrumented server may take a while).
def unsent():
    out = subprocess.run(["ss", "-tniH", "state", "established",
                          "sport = :%s" % PORT],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"notsent:(\d+)", out)
    return int(m.group(1)) if m else 0
most, start = 0, time.time()
while time.time() - start < 20:
    most = max(most, unsent())
    if most > (MiB if PLAIN else 0) and \
       (PLAIN or time.time() - start >= 1.5):
        break
    time.sleep(0.1)
print("unsent:", most)
with open(OUT, "w") as f:
    print("UNSENT=%d" % most, file=f)
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(8):
    assert bufs[i].to_bytearray() == pattern, i
print("bytes ok")
PY

# run KIND TLS-ARGS...: serve on TCP, run check.py, leave the unsent
# byte count in $unsent.
run ()
{
  local kind="$1" scheme=nbd user="" query=""
  shift
  start_tcp_server "$@" memory 32M
  case "$kind" in
    psk) scheme=nbds user=alice@ query="?tls-psk-file=$tmpdir/tls/keys.psk" ;;
    x509) scheme=nbds query="?tls-certificates=$tmpdir/tls/client" ;;
  esac
  timeout 120 nbdsh -c 'h.set_uri_allow_local_file(True)' \
    -c "h.connect_uri('$scheme://${user}127.0.0.1:$port/$query')" \
    -c "PORT = '$port'; OUT = '$tmpdir/out'; PLAIN = '$kind' == 'plain'" \
    -c "exec(open('$tmpdir/check.py').read())" ||
    fail "$kind: the reads were wrong"
  stop_server
  unsent="$(sed -n 's/^UNSENT=//p' "$tmpdir/out")"
  echo "$kind: $unsent bytes unsent while the client did not read"
}

# check_limited KIND: the stall was seen, and held to the limit.
check_limited ()
{
  [ "$unsent" -gt 0 ] ||
    fail "TLS $1: nothing was ever unsent (the stall was not seen)"
  [ "$unsent" -le $(( 64 * 1024 + 64 * 1024 )) ] ||
    fail "TLS $1: $unsent bytes unsent (the limit is 64 KiB)"
}
run psk --tls=require --tls-psk="$tmpdir/tls/keys.psk"
check_limited PSK
run x509 --tls=require --tls-certificates="$tmpdir/tls/server"
check_limited X.509
run plain
[ "$unsent" -gt $(( 1024 * 1024 )) ] ||
  fail "plain TCP: only $unsent bytes unsent (plain TCP should not be limited)"
