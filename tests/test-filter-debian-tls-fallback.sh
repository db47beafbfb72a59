#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Debian's tls-fallback filter does not open the layer below for a
# plaintext client (its open skips next), and serves 512 bytes of its
# own message instead; a TLS client gets the plugin.  The server must
# accept an open that leaves the next layer closed (it used to refuse
# the connection) and never call into a layer that was not opened.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh certtool
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-tls-fallback-filter.so"
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
d="$tmpdir/tls"
start_server --tls=on --tls-certificates="$d/server" \
  --filter="$fdir/nbdkit-tls-fallback-filter.so" memory 8M \
  tlsreadme='plaintext clients get this'

# Plaintext: the filter's own export, the plugin is not reached.
t nbdsh -u "$uri" -c - <<'PY'
assert not h.get_tls_negotiated()
assert h.get_size() == 512
assert h.is_read_only()
buf = h.pread(512, 0)
assert buf.startswith(b"plaintext clients get this"), buf
PY

# TLS: the plugin, writable, 8M; a second plaintext client after it
# still works, so the skipped layer left nothing behind.
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix:///?socket=$sock&tls-certificates=$d/client')
assert h.get_tls_negotiated()
assert h.get_size() == 8 * 1024 * 1024
h.pwrite(b'through tls' * 10, 4096)
assert h.pread(110, 4096) == b'through tls' * 10
"
t nbdsh -u "$uri" -c 'assert h.get_size() == 512'
kill -0 "$server_pid" || fail "the server died"
