#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The iso plugin's probe: iso_build fires once at start-up with the
# program, the build's duration and the image's size; and with size 0
# when the program fails.  It fires before the server listens, so
# bpftrace attaches by the .so's path before the server starts.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdinfo xorriso timeout
requires_root
tracing_lock

so="$abs_top_builddir/plugins/iso/.libs/nbdkit-iso-plugin.so"
[ -f "$so" ] || fail "$so not built"
export TMPDIR="$tmpdir"
d="$tmpdir/root"
mkdir "$d"
echo hello > "$d/hello"

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:iso_build {
  printf("build %d %s %d %d\n", pid, str(arg0), arg1 / 1000, arg2);
}
BT
start_bpftrace 60 "$tmpdir/bt.out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - iso "$d" prog=xorriso \
  --run 'echo $PPID > '"$tmpdir/pid1"'; nbdinfo --size "$uri" > '"$tmpdir/size" ||
  fail "the server failed"
"$NBDKIT" -U - iso "$d" params=--bogus --run true || :
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/bt.out"

pid1="$(cat "$tmpdir/pid1")"
size="$(cat "$tmpdir/size")"
grep -Eq "^build $pid1 xorriso [0-9]+ $size\$" "$tmpdir/bt.out" ||
  fail "no iso_build (xorriso, $size) from server $pid1"
[ "$(grep -Ec '^build [0-9]+ xorriso [0-9]+ 0$' "$tmpdir/bt.out")" -eq 1 ] ||
  fail "no iso_build with size 0 for the failed build"
[ "$(grep -c '^build ' "$tmpdir/bt.out")" -eq 2 ] ||
  fail "expected 2 iso_build events"
awk '$1 == "build" && ($4 <= 0 || $4 > 60000000) { exit 1 }' \
  "$tmpdir/bt.out" || fail "a duration is out of range"
