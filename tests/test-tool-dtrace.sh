#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit.d, the DTrace script for illumos, FreeBSD and macOS,
# against server/probes.d, as text only (there is no DTrace on Linux to
# compile or run it): every clause is on nbdkit$target (one server),
# every nbdkit$target:::NAME clause names a real probe, reads only arguments that
# exist, reads string arguments with copyinstr() and only those
# (tools/probes-check.py).  The same check covers the bpftrace scripts
# (str() for strings, nothing beyond arg5).  The D library
# tools/nbdkit_translators.d has one translator per probe of probes.d
# that uses every argument, strings with copyinstr() and only those,
# and names commands, options and reply types as the server does; the
# bpftrace scripts' name tables too.  Then the checker itself must catch
# a copy of nbdkit.d and of the library broken on purpose (it would
# catch a probe added to probes.d without a translator, a translator
# reading an argument the probe lacks, or a renamed command).
source "$(dirname "$0")/functions.sh"
requires_cmd python3
tracing_lock
check="$abs_top_srcdir/tools/probes-check.py"
probes_d="$abs_top_srcdir/server/probes.d"

python3 "$check" "$probes_d" d "$abs_top_srcdir/tools/nbdkit.d" ||
  fail "nbdkit.d and probes.d disagree"
# nbdkit.d watches one server (dtrace -p PID or -c CMD): every clause
# is on nbdkit$target, none on every server of the machine.
grep -q '^nbdkit\$target:::' "$abs_top_srcdir/tools/nbdkit.d" &&
  ! grep -En '^nbdkit(\*|[0-9]*):::' "$abs_top_srcdir/tools/nbdkit.d" ||
  fail "nbdkit.d has clauses not scoped to nbdkit\$target"
python3 "$check" "$probes_d" bt "$abs_top_srcdir"/tools/*.bt ||
  fail "a bpftrace script and probes.d disagree"

lib="$abs_top_builddir/tools/nbdkit_translators.d"
python3 "$check" "$probes_d" dlib "$lib" ||
  fail "nbdkit_translators.d and probes.d disagree"
python3 "$check" "$probes_d" names "$lib" ||
  fail "nbdkit_translators.d names things unlike the server"
bt_named=$(grep -l '@nbd_\(cmd\|opt\|rep\)\[' "$abs_top_srcdir"/tools/nbdkit-*.bt)
[ -n "$bt_named" ] || fail "no bpftrace script names commands or options"
python3 "$check" "$probes_d" names $bt_named ||
  fail "a bpftrace script names things unlike the server"

# The library broken on purpose: a translator gone, an argument left
# out, an argument too far, a command renamed.
sed -e '/^translator nbdkit_hsinfo_t < nbdkit_handshake_fail_t/,/^};/d' \
    -e '/^\tci_bytes_out = arg4;/d' \
    -e 's/^\tsv_address = copyinstr(arg1);/\tsv_address = copyinstr(arg2);/' \
    -e 's/"write_zeroes"/"zero"/' "$lib" > "$tmpdir/bad-lib.d"
python3 "$check" "$probes_d" dlib "$tmpdir/bad-lib.d" > "$tmpdir/bad-lib.out" || :
python3 "$check" "$probes_d" names "$tmpdir/bad-lib.d" >> "$tmpdir/bad-lib.out" || :
cat "$tmpdir/bad-lib.out"
grep -q 'probe handshake_fail has no translator' "$tmpdir/bad-lib.out" ||
  fail "checker missed a missing translator"
grep -q 'connection_close: the translator leaves out arg4' "$tmpdir/bad-lib.out" ||
  fail "checker missed an argument left out"
grep -q 'listen has 2 arguments, arg2 used' "$tmpdir/bad-lib.out" ||
  fail "checker missed an argument too far"
grep -q 'cmd 0x6 is zero here, write_zeroes in the server' "$tmpdir/bad-lib.out" ||
  fail "checker missed a renamed command"

# Broken on purpose: a string read as an integer, an argument too far.
sed -e 's/copyinstr(arg1))/arg1)/' -e 's/arg5 \/ 1000000/arg6/' \
  "$abs_top_srcdir/tools/nbdkit.d" > "$tmpdir/bad.d"
python3 "$check" "$probes_d" d "$tmpdir/bad.d" > "$tmpdir/bad.out" || :
cat "$tmpdir/bad.out"
grep -q 'handshake_fail: arg1 (reason) is a string' "$tmpdir/bad.out" ||
  fail "checker missed a string read as an integer"
grep -q 'connection_close has 6 arguments, arg6 used' "$tmpdir/bad.out" ||
  fail "checker missed arg6 of connection_close"
