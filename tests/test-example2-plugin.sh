#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example2 plugin: serves file= read-only.  Same size, flags, map
# and bytes as Debian's nbdkit example2; writes refused; the debug flag
# logs reads; a missing, absent or unknown parameter is one error line.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy
source "$srcdir/debian-filters.sh"

# A file whose size is not a multiple of 512, with data and holes.
make_pattern "$tmpdir/disk" 1000003

# Debian's nbdkit 1.32.5 package ships no example plugins: where it has
# none, both servers load ours by path (the same comparison of what each
# server makes of one plugin).
ex2=example2
[ -f "$debian_plugindir/nbdkit-example2-plugin.so" ] ||
  ex2="$abs_top_builddir/plugins/example2/.libs/nbdkit-example2-plugin.so"
compare "example2" read "$ex2" file="$tmpdir/disk"

cd "$tmpdir"
t "$NBDKIT" -U - example2 file=disk --run 'nbdsh -u "$uri" -c -' <<'PY'
import os
data = open("disk", "rb").read()
assert h.get_size() == len(data)
assert h.is_read_only()
for off, n in [(0, 4096), (len(data) - 7, 7), (262140, 9), (123457, 65536)]:
    assert h.pread(n, off) == data[off:off + n], (off, n)
try:
    h.pwrite(b"x", 0)
    assert False, "write to a read-only disk succeeded"
except nbd.Error:
    pass
PY

# -D example2.extra=1 logs each read.
t "$NBDKIT" -v -D example2.extra=1 -U - example2 file=disk \
  --run 'nbdsh -u "$uri" -c "h.pread(5, 77)"' 2> "$tmpdir/log"
grep -q 'pread count=5 offset=77' "$tmpdir/log" ||
  fail "no debug line for the read: $(grep example2 "$tmpdir/log" | head)"

# Bad parameters: one error line each, exit status 1.
bad ()
{
  local key="$1"
  shift
  refuses "example2.*$key" example2 "$@" ||
    fail "example2 $*: not refused with one line naming $key"
}
bad no-such-file file="$tmpdir/no-such-file"
bad file file=
bad foo foo=bar
status=0
"$NBDKIT" -U - example2 --run true 2> "$tmpdir/err" || status=$?
[ "$status" = 1 ] && grep -q 'example2.*file=' "$tmpdir/err" ||
  fail "no file=: status $status, $(cat "$tmpdir/err")"

finish
