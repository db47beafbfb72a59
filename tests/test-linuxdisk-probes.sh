#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The linuxdisk plugin's probe: linuxdisk_build fires once at start-up
# with the directory, the disk's size and the build's duration; and
# with size 0 when the build fails.  It fires before the server
# listens, so bpftrace attaches by the .so's path before it starts.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdinfo mke2fs timeout
requires_root
tracing_lock

so="$abs_top_builddir/plugins/linuxdisk/.libs/nbdkit-linuxdisk-plugin.so"
[ -f "$so" ] || fail "$so not built"
export TMPDIR="$tmpdir"
d="$tmpdir/root"
mkdir "$d"
echo hello > "$d/hello"
head -c 3M /dev/urandom > "$d/big"

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:linuxdisk_build {
  printf("build %d %s %d %d\n", pid, str(arg0), arg1, arg2 / 1000);
}
BT
start_bpftrace 60 "$tmpdir/bt.out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - linuxdisk "$d" \
  --run 'echo $PPID > '"$tmpdir/pid1"'; nbdinfo --size "$uri" > '"$tmpdir/size" ||
  fail "the server failed"
# A build that fails (the files do not fit).
echo "exit status of the failing server:"
"$NBDKIT" -U - linuxdisk "$d" size=1M --run true || :
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/bt.out"

pid1="$(cat "$tmpdir/pid1")"
size="$(cat "$tmpdir/size")"
grep -q "^build $pid1 $d $size [0-9]*\$" "$tmpdir/bt.out" ||
  fail "no linuxdisk_build ($d, $size) from server $pid1"
[ "$(grep -c "^build .* $d 0 " "$tmpdir/bt.out")" -eq 1 ] ||
  fail "no linuxdisk_build with size 0 for the failed build"
[ "$(grep -c '^build ' "$tmpdir/bt.out")" -eq 2 ] ||
  fail "expected 2 linuxdisk_build events"
awk '$1 == "build" && ($5 <= 0 || $5 > 60000000) { exit 1 }' \
  "$tmpdir/bt.out" || fail "a duration is out of range"
