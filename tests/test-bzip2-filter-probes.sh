#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The bzip2 filter's probe under bpftrace: bzip2_decompressed fires
# once, on the first connection, with the compressed bytes (two
# streams, without the junk after them), the uncompressed size and the
# number of streams; a second client finds the content ready.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/compress-filters.sh"
requires_tracer nbdsh nbdinfo bzip2

make_sample "$tmpdir/a" 700000 3
make_sample "$tmpdir/b" 123456 4
bzip2 -c "$tmpdir/a" > "$tmpdir/a.bz2"
bzip2 -c "$tmpdir/b" > "$tmpdir/b.bz2"
{ cat "$tmpdir/a.bz2" "$tmpdir/b.bz2"; printf 'junk'; } > "$tmpdir/disk.bz2"

so="$(filter_so bzip2)"
start_server --filter=bzip2 file "$tmpdir/disk.bz2"
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:bzip2_decompressed { printf(\"dec %d %d %d\\n\", arg0, arg1, arg2); }"
t nbdinfo --size "$uri" > "$tmpdir/size"
t nbdsh -u "$uri" -c 'h.pread(4096, 0)'
trace_stop

[ "$(cat "$tmpdir/size")" = $(( 700000 + 123456 )) ] ||
  fail "size $(cat "$tmpdir/size")"
expected="dec $(( $(stat -c %s "$tmpdir/a.bz2") + $(stat -c %s "$tmpdir/b.bz2") )) $(( 700000 + 123456 )) 2"
got="$(grep '^dec' "$tmpdir/trace" || :)"
[ "$got" = "$expected" ] ||
  { cat "$tmpdir/trace" "$tmpdir/trace.err"
    fail "expected '$expected', got '$got'"; }
