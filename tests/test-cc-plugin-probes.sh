#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cc plugin's probe: cc_compile fires once per start-up, after the
# compiler ran, with the source path, the time it took and the
# compiler's exit status: 0 for a good source, 1 for one that does not
# compile.  It fires before the server listens, so bpftrace watches the
# .so for every process and the lines are picked by the source path.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace cc gcc nbdinfo
requires_root
tracing_lock

so="$abs_top_builddir/plugins/cc/.libs/nbdkit-cc-plugin.so"
[ -f "$so" ] || fail "$so not built"
good="$tmpdir/good.c"
cp "$abs_top_srcdir/plugins/cc/test-cc-disk.c" "$good"
bad="$tmpdir/bad.c"
printf 'int x = ;\n' > "$bad"

printf '%s\n' "usdt:$so:nbdkit:cc_compile {
  printf(\"compile %s %d %d\\n\", str(arg0), arg1 > 1000, arg2); }" \
  > "$tmpdir/trace.bt"
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - cc "$good" --run 'nbdinfo --size "$uri"' ||
  fail "the good source did not serve"
expect_fail t "$NBDKIT" -U - cc "$bad" --run true 2>/dev/null
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/trace"
grep -qx "compile $good 1 0" "$tmpdir/trace" ||
  fail "no cc_compile ($good, took > 1 us, status 0)"
grep -qx "compile $bad 1 1" "$tmpdir/trace" ||
  fail "no cc_compile ($bad, took > 1 us, status 1)"
