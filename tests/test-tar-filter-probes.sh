#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tar filter's probe: tar_entry_found (offset, size, name) fires
# once, when the first connection finds the member, with the offset of
# its data in the archive (the block after its header, as GNU tar -R
# lists it), its size and the tar-entry name; later connections reuse
# the answer and do not fire it again.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh nbdinfo tar
tracing_lock

mkdir -p "$tmpdir/src/d"
head -c 100000 /dev/urandom > "$tmpdir/src/d/a.img"
head -c 70000 /dev/urandom > "$tmpdir/src/d/b.img"
tar -C "$tmpdir/src" -cf "$tmpdir/t.tar" --format=pax d
block="$(tar -tvR -f "$tmpdir/t.tar" |
         awk '/ d\/b.img$/ { sub(":", "", $2); print $2 }')"
[ -n "$block" ] || fail "tar -tvR did not list d/b.img"

start_server file "$tmpdir/t.tar" --filter=tar tar-entry=d/b.img
so="$(filter_so tar)"
trace_start "$tmpdir/trace" "usdt:$so:nbdkit:tar_entry_found {
  printf(\"found %d %d %s\\n\", arg0, arg1, str(arg2)); }"
t nbdinfo --size "$uri" > /dev/null
t nbdinfo --size "$uri" > /dev/null
trace_stop
cat "$tmpdir/trace"
grep '^found ' "$tmpdir/trace" > "$tmpdir/got" || :
echo "found $(( (block + 1) * 512 )) 70000 d/b.img" > "$tmpdir/want"
diff -u "$tmpdir/want" "$tmpdir/got" ||
  fail "tar_entry_found did not fire as expected"
