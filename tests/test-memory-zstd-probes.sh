#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The zstd page store's probes, under bpftrace on a running memory
# plugin with allocator=zstd: a 4 KiB write into a new 32 KiB page
# compresses that page once (offset 0, 32768 bytes, a few dozen bytes
# compressed, since the page is all 'a' and zeroes) with nothing to
# decompress; a read of it decompresses it; a second write into the
# same page decompresses then compresses it; a page written all zero is
# dropped, not compressed.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
requires grep -q '^zstd=yes' <("$NBDKIT" memory --dump-plugin)
tracing_lock

so="$abs_top_builddir/plugins/memory/.libs/nbdkit-memory-plugin.so"
start_server memory 64M allocator=zstd
trace_start "$tmpdir/bt" "
usdt:$so:nbdkit:allocator_zstd_compress /arg0 != 0 && arg1 != 0/ { printf(\"compress %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:allocator_zstd_decompress /arg0 != 0 && arg1 != 0/ { printf(\"decompress %d %d %d\\n\", arg2, arg3, arg4); }"
t nbdsh -u "$uri" -c '
h.pwrite(b"a" * 4096, 0)
assert h.pread(4096, 0) == b"a" * 4096
h.pwrite(b"b" * 512, 8192)
h.pwrite(bytes(4096), 1 << 20)
' || fail "client failed"
trace_stop
cat "$tmpdir/bt"
grep -E '^(compress|decompress)' "$tmpdir/bt" > "$tmpdir/events"
[ "$(wc -l < "$tmpdir/events")" -eq 4 ] || fail "expected 4 events"
read -r kind off size clen < <(sed -n 1p "$tmpdir/events")
[ "$kind $off $size" = "compress 0 32768" ] || fail "first event: $kind $off $size"
[ "$clen" -gt 0 ] && [ "$clen" -lt 1024 ] || fail "compressed size $clen"
read -r kind off clen2 size < <(sed -n 2p "$tmpdir/events")
[ "$kind $off $clen2 $size" = "decompress 0 $clen 32768" ] ||
  fail "second event: $kind $off $clen2 $size (expected decompress 0 $clen 32768)"
sed -n 3p "$tmpdir/events" | grep -qx "decompress 0 $clen 32768" ||
  fail "the partial write did not decompress the page first"
sed -n 4p "$tmpdir/events" | grep -Eq '^compress 0 32768 [0-9]+$' ||
  fail "the partial write did not compress the page again"
