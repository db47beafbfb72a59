#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A client that disconnects in the middle of a write's payload never
# has any of it applied, and never gets it acknowledged.  The client
# sends a 256 KiB write with 0, 1, 100 KiB or all but one byte of its
# payload, then closes its sending side and reads what comes back:
# the server must close without a reply (0 bytes), the plugin must see
# no pwrite, and the disk must still hold what was there before.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh python3

plugin="$abs_builddir/.libs/fault-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"
client="$srcdir/fault-client.py"
log="$tmpdir/calls"
: > "$log"
start_server "$plugin" log="$log"

t nbdsh -u "$uri" -c '
h.pwrite(bytes(range(256)) * 1024, 0)
'
[ "$(grep -c '^pwrite$' "$log")" -eq 1 ] || fail "setup write not logged"

len=$((256 * 1024))
for sent in 0 1 $((100 * 1024)) $((len - 1)); do
  got="$(t python3 "$client" partial-write "$sock" 0 "$len" "$sent")" ||
    fail "client failed (sent $sent)"
  [ "$got" = 0 ] ||
    fail "write cut after $sent of $len bytes: server sent $got bytes back"
done

# The control: a complete write through the same client is answered
# (a 16-byte simple reply) and applied.
got="$(t python3 "$client" partial-write "$sock" $len 4096 4096)"
[ "$got" = 16 ] || fail "a complete write got $got bytes back, not a reply"

[ "$(grep -c '^pwrite$' "$log")" -eq 2 ] ||
  fail "a cut-short write reached the plugin: $(grep -c '^pwrite$' "$log") pwrites"
t nbdsh -u "$uri" -c '
assert h.pread(256 * 1024, 0) == bytes(range(256)) * 1024, \
    "bytes of a cut-short write were applied"
assert h.pread(4096, 256 * 1024) == b"\xaa" * 4096, "the complete write is lost"
'
