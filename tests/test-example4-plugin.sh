#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example4 plugin: one RAM disk of size= bytes shared by every
# client.  Debian's example4 is a Perl script and Debian's Perl plugin
# host is not installed here, so this tests the documented answers:
# the flags of a plain pread/pwrite plugin, writes seen by the next
# connection, parallel writers from several connections, and size=
# required and checked.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy sha256sum

start_server example4 size=4M

t nbdsh -u "$uri" -c - <<'PY'
assert h.get_size() == 4 * 1024 * 1024
assert not h.is_read_only()
assert not h.can_flush()
assert not h.can_trim()
assert not h.can_multi_conn()
assert h.pread(65536, 0) == bytes(65536)
h.pwrite(b"shared", 4 * 1024 * 1024 - 6)
h.zero(100, 4096 - 50)
PY
t nbdsh -u "$uri" -c - <<'PY'
assert h.pread(6, h.get_size() - 6) == b"shared", "second client lost a write"
PY

# Four connections writing at once, then the bytes read back by a
# fifth connection must be the file's.
head -c 4M /dev/urandom > "$tmpdir/src"
t nbdcopy --connections=4 --requests=16 "$tmpdir/src" "$uri"
t nbdcopy "$uri" "$tmpdir/dst"
cmp "$tmpdir/src" "$tmpdir/dst" || fail "bytes read back differ"
stop_server

# Size 0 is a valid empty disk.
t "$NBDKIT" -U - example4 size=0 --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 0 ] || fail "size=0 gave $(cat "$tmpdir/size")"

# Bad parameters: one line naming the key, exit status 1.
for args in size=foo size=-1 foo=bar ""; do
  key="${args%%=*}"
  key="${key:-size}"
  status=0
  "$NBDKIT" -U - example4 $args --run true 2> "$tmpdir/err" || status=$?
  [ "$status" = 1 ] && [ "$(wc -l < "$tmpdir/err")" = 1 ] &&
    grep -q "example4.*$key" "$tmpdir/err" ||
    fail "example4 $args: status $status: $(cat "$tmpdir/err")"
done
