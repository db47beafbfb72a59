#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit.d, the DTrace script for illumos, FreeBSD and macOS,
# against server/probes.d (there is no DTrace on Linux to run it): every
# nbdkit*:::NAME clause names a real probe, reads only arguments that
# exist, reads string arguments with copyinstr() and only those
# (tools/probes-check.py).  The same check covers the bpftrace scripts
# (str() for strings, nothing beyond arg5).  Then the checker itself
# must catch a copy of nbdkit.d broken on purpose.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
tracing_lock
check="$abs_top_srcdir/tools/probes-check.py"
probes_d="$abs_top_srcdir/server/probes.d"

python3 "$check" "$probes_d" d "$abs_top_srcdir/tools/nbdkit.d" ||
  fail "nbdkit.d and probes.d disagree"
python3 "$check" "$probes_d" bt "$abs_top_srcdir"/tools/nbdkit-*.bt ||
  fail "a bpftrace script and probes.d disagree"

# Broken on purpose: a string read as an integer, an argument too far.
sed -e 's/copyinstr(arg1))/arg1)/' -e 's/arg5 \/ 1000000/arg6/' \
  "$abs_top_srcdir/tools/nbdkit.d" > "$tmpdir/bad.d"
python3 "$check" "$probes_d" d "$tmpdir/bad.d" > "$tmpdir/bad.out" || :
cat "$tmpdir/bad.out"
grep -q 'handshake_fail: arg1 (reason) is a string' "$tmpdir/bad.out" ||
  fail "checker missed a string read as an integer"
grep -q 'connection_close has 6 arguments, arg6 used' "$tmpdir/bad.out" ||
  fail "checker missed arg6 of connection_close"
