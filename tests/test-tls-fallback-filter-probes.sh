#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tls_fallback_plaintext fires under bpftrace for each plaintext client
# with the export name it asked for, and not for a TLS client.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdinfo nbdsh certtool
assert_tls_build
tracing_lock

t "$srcdir/make-tls-files.sh" "$tmpdir/tls" > /dev/null
so="$(filter_so tls-fallback)"
start_server --tls=on --tls-certificates="$tmpdir/tls/server" \
  --filter=tls-fallback memory 1M
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:tls_fallback_plaintext { printf(\"plaintext|%s\\n\", str(arg0)); }"
t nbdinfo --size "nbd+unix:///secret?socket=$sock" > /dev/null
t nbdinfo --size "nbd+unix:///?socket=$sock" > /dev/null
t nbdsh -c "
h.set_uri_allow_local_file(True)
h.connect_uri('nbds+unix:///tls?socket=$sock&tls-certificates=$tmpdir/tls/client')
assert h.get_size() == 1048576
"
trace_stop
cat "$tmpdir/trace"
printf 'plaintext|%s\n' secret "" > "$tmpdir/want"
grep '^plaintext' "$tmpdir/trace" > "$tmpdir/got" || :
diff -u "$tmpdir/want" "$tmpdir/got" || fail "tls_fallback_plaintext: not as expected"
