#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=tls-fallback under --tls=on, with real TLS: a plaintext
# client gets one read-only 512-byte export "" holding the message and
# zeroes, whatever name it asks for, with every capability off, and the
# plugin is never opened for it (its writes cannot reach the disk); a
# client with an X.509 certificate, or a PSK, gets the plugin.  A long
# tlsreadme is cut at 512 bytes.  What a plaintext client sees is what
# Debian's nbdkit shows.  A plugin serving one connection at a time is
# refused, as is an unknown parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd nbdsh nbdinfo certtool psktool
assert_tls_build

t "$srcdir/make-tls-files.sh" "$tmpdir/tls" > /dev/null
d="$tmpdir/tls"
disk="$tmpdir/disk.img"
truncate -s 4M "$disk"

start_server --tls=on --tls-certificates="$d/server" \
  --filter=tls-fallback file "$disk" tlsreadme='Use TLS, please.'

# Plaintext, asking for the default export and for another name.
for name in "" secret; do
  t nbdsh -c - <<PY
h.set_export_name("$name")
h.connect_uri("nbd+unix:///$name?socket=$sock")
assert not h.get_tls_negotiated()
assert h.get_size() == 512, h.get_size()
assert h.is_read_only()
for can in (h.can_flush, h.can_trim, h.can_zero, h.can_fast_zero,
            h.can_fua, h.can_multi_conn, h.can_cache):
    assert not can(), can
assert not h.can_meta_context("base:allocation")
want = b"Use TLS, please." + bytes(512 - 16)
assert h.pread(512, 0) == want
assert h.pread(10, 502) == bytes(10)
h.set_strict_mode(0)
try:
    h.pwrite(b"plaintext was here", 0)
except nbd.Error as e:
    print("plaintext write refused:", e.errno)
else:
    raise AssertionError("a plaintext write succeeded")
PY
done
# Listing without TLS shows only the fallback export.
t nbdsh -c "
h.set_opt_mode(True)
h.connect_uri('nbd+unix:///?socket=$sock')
names = []
h.opt_list(lambda n, d: names.append(n))
assert names == [''], names
"
cmp -s "$disk" <(head -c 4M /dev/zero) ||
  fail "a plaintext client changed the disk"

# X.509: the plugin, writable, 4M.
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix:///?socket=$sock&tls-certificates=$d/client')
assert h.get_tls_negotiated()
assert h.get_size() == 4 * 1024 * 1024
assert not h.is_read_only()
h.pwrite(b'written over tls', 65536)
h.flush()
assert h.pread(16, 65536) == b'written over tls'
"
[ "$(dd if="$disk" bs=1 skip=65536 count=16 status=none)" = "written over tls" ] ||
  fail "the TLS client's write is not in the file"
stop_server

# PSK, and the default message; the message cut at 512 bytes.
start_server --tls=on --tls-psk="$d/keys.psk" --filter=tls-fallback \
  file "$disk" tlsreadme="$(printf 'z%.0s' $(seq 600))"
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix://alice@/?socket=$sock&tls-psk-file=$d/keys.psk')
assert h.get_tls_negotiated()
assert h.get_size() == 4 * 1024 * 1024
assert h.pread(16, 65536) == b'written over tls'
"
t nbdsh -u "nbd+unix:///?socket=$sock" -c "
assert h.get_size() == 512
assert h.pread(512, 0) == b'z' * 512
"
stop_server

# The same as Debian's nbdkit for plaintext clients.
for readme in "" "tlsreadme=hello" "tlsreadme=$(printf 'q%.0s' $(seq 700))"; do
  # shellcheck disable=SC2086
  compare_own "tls-fallback ${readme:0:20} read" read \
    --tls=on --tls-certificates="$d/server" --filter=tls-fallback \
    file "$disk" $readme
done

# A plugin serving one connection at a time: refused, exit 1.
cat > "$tmpdir/one.sh" <<'SH'
#!/bin/sh
case "$1" in
  get_size) echo 1048576 ;;
  pread) head -c "$3" /dev/zero ;;
  thread_model) echo serialize_connections ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/one.sh"
if [ -f "$debian_plugindir/nbdkit-sh-plugin.so" ]; then
  set +e
  "$NBDKIT" -U - --tls=on --tls-certificates="$d/server" \
    --filter=tls-fallback "$debian_plugindir/nbdkit-sh-plugin.so" \
    "$tmpdir/one.sh" --run true > "$tmpdir/err" 2>&1
  status=$?
  set -e
  [ "$status" -eq 1 ] &&
    grep -q "tls-fallback: error: .*one connection at a time" "$tmpdir/err" ||
    { cat "$tmpdir/err"; fail "SERIALIZE_CONNECTIONS not refused"; }
fi

# An unknown parameter goes down to the plugin, which refuses it.
set +e
"$NBDKIT" -U - --tls=on --tls-certificates="$d/server" --filter=tls-fallback \
  memory 1M tlsreadm=oops --run true > "$tmpdir/err" 2>&1
status=$?
set -e
[ "$status" -eq 1 ] && [ "$(wc -l < "$tmpdir/err")" -eq 1 ] &&
  grep -q tlsreadm "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "tlsreadm=oops: not one line naming it"; }
finish
