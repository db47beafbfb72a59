#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The zero plugin: an empty, read-only export, the same size, flags and
# (empty) copy as Debian's nbdkit 1.32 zero plugin; any parameter is
# refused.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires test -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-zero-plugin.so

t "$NBDKIT" -U - zero --run 'nbdsh -u "$uri" -c -' <<'PY'
assert h.get_size() == 0
assert h.is_read_only()
try:
    h.pread(1, 0)
    assert False, "read past the end"
except nbd.Error:
    pass
PY
compare zero read zero

status=0
"$NBDKIT" -U - zero size=1 --run true 2> "$tmpdir/err" || status=$?
[ $status -eq 1 ] && grep -q "zero" "$tmpdir/err" ||
  fail "zero size=1: status $status: $(cat "$tmpdir/err")"
finish
