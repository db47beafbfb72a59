#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# TLS with X.509 certificates made by certtool (make-tls-files.sh):
# nbdinfo, nbdsh, nbdcopy and qemu-img over TLS; --tls-verify-peer
# refusing a client with no certificate, one from another CA and an
# expired one, each while the server goes on serving a good client;
# clients refusing a server whose certificate is expired or from
# another CA; and the client's DN as the plugin sees it.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh nbdcopy qemu-img certtool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
uri_for () { echo "nbds+unix:///${2:-}?socket=$sock&tls-certificates=$d/$1"; }

# --- verify-peer: only clients with a certificate from our CA ---------
start_server --tls=require --tls-certificates="$d/server" --tls-verify-peer \
  memory 8M

t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$(uri_for client)')
assert h.get_tls_negotiated()
h.pwrite(b'canary over x509' * 256, 4096)
"
for who in client-nocert client-rogue client-expired; do
  if t nbdinfo "$(uri_for "$who")" >"$tmpdir/$who.out" 2>&1; then
    fail "$who was served under --tls-verify-peer"
  fi
  echo "$who refused: $(head -1 "$tmpdir/$who.out")"
  kill -0 "$server_pid" || fail "server died after $who"
  t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$(uri_for client)')
assert h.pread(4096, 4096) == b'canary over x509' * 256
" || fail "good client not served after $who"
done

# nbdcopy and qemu-img over the same TLS.
head -c 1048576 /dev/urandom > "$tmpdir/in.img"
t nbdcopy "$tmpdir/in.img" "$(uri_for client)"
t nbdcopy "$(uri_for client)" "$tmpdir/out.img"
cmp -n 1048576 "$tmpdir/in.img" "$tmpdir/out.img" ||
  fail "nbdcopy over TLS changed the bytes"
t qemu-img info --output=json \
  --object tls-creds-x509,id=tls0,dir="$d/client",endpoint=client \
  --image-opts "driver=nbd,path=$sock,tls-creds=tls0,tls-hostname=localhost" \
  > "$tmpdir/qemu.json"
grep -q '"virtual-size": 8388608' "$tmpdir/qemu.json" ||
  fail "qemu-img info over TLS: $(cat "$tmpdir/qemu.json")"
t qemu-img convert -O raw \
  --object tls-creds-x509,id=tls0,dir="$d/client",endpoint=client \
  --image-opts "driver=nbd,path=$sock,tls-creds=tls0,tls-hostname=localhost" \
  "$tmpdir/qemu.img"
cmp -n 1048576 "$tmpdir/in.img" "$tmpdir/qemu.img" ||
  fail "qemu-img read different bytes over TLS"
stop_server

# --- clients refuse a server they cannot trust --------------------------
# Over TCP to "localhost": libnbd checks the server's certificate
# against the host name it dialled (over a Unix socket it has none).
for srv in server server-expired server-rogue; do
  port="$(free_port)"
  # The pid file outlives its server (as nbdkit's does): one left by an
  # earlier server (start_server's is server.pid too) would say "ready"
  # before this one listens.
  rm -f "$tmpdir/$srv.pid"
  "$NBDKIT" -f -i 127.0.0.1 -p "$port" -P "$tmpdir/$srv.pid" \
    --tls=require --tls-certificates="$d/$srv" memory 1M &
  pid=$!
  cleanup_fn _kill_pid "$pid"
  wait_for 20 -s "$tmpdir/$srv.pid" || fail "$srv did not start"
  uri="nbds://localhost:$port/?tls-certificates=$d/client"
  if [ "$srv" = server ]; then
    t nbdinfo "$uri" >/dev/null || fail "the client did not trust $srv"
  else
    if t nbdinfo "$uri" >"$tmpdir/$srv.out" 2>&1; then
      fail "the client trusted $srv"
    fi
    echo "$srv refused by the client: $(head -1 "$tmpdir/$srv.out")"
    kill -0 "$pid" || fail "server died after a client refused $srv"
  fi
  kill "$pid"; wait "$pid" || :
done

# --- the plugin sees the client's verified identity -----------------
start_server --tls=require --tls-certificates="$d/server" --tls-verify-peer \
  "$abs_builddir/.libs/tls-info-plugin.so"
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('$(uri_for client secure)')
line = h.pread(128, 0).split(b'\n')[0]
print(line)
assert line == b'tls=1 dn=CN=client.test,O=nbdkit tests issuer=CN=ca user=', line
"
