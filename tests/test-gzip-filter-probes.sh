#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The gzip filter's probe: gzip_inflated fires once, when the first
# client's connection has inflated the file, with the compressed size
# (the whole gzip file here) and the uncompressed size; a second client
# finds the content ready and does not fire it again.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh nbdinfo gzip
requires_root
tracing_lock

raw="$tmpdir/disk.raw"
head -c 1000000 /dev/urandom > "$raw"
head -c 300000 /dev/zero >> "$raw"
gzip -c "$raw" > "$tmpdir/disk.gz"

so="$(filter_so gzip)"
start_server --filter=gzip file "$tmpdir/disk.gz"
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:gzip_inflated { printf(\"inflated %d %d\\n\", arg0, arg1); }"
t nbdinfo --size "$uri" > "$tmpdir/size"
t nbdsh -u "$uri" -c 'h.pread(4096, 0)'
trace_stop

[ "$(cat "$tmpdir/size")" = 1300000 ] || fail "size $(cat "$tmpdir/size")"
expected="inflated $(stat -c %s "$tmpdir/disk.gz") 1300000"
got="$(grep '^inflated' "$tmpdir/trace" || :)"
[ "$got" = "$expected" ] ||
  { cat "$tmpdir/trace" "$tmpdir/trace.err"
    fail "expected '$expected', got '$got'"; }
