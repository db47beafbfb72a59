#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The floppy plugin's floppy_build probe fires once when the image is
# laid out, with the number of files, of directories (with the root),
# the disk's size and a plausible duration, seen by bpftrace.  The build
# happens before the server listens, so bpftrace attaches to the .so
# first and the server's pid picks its events out.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdinfo timeout readelf
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"
tracing_lock

so="$abs_top_builddir/plugins/floppy/.libs/nbdkit-floppy-plugin.so"
[ -f "$so" ] || fail "$so not built"
readelf -n "$so" | grep -q 'Name: floppy_build' ||
  fail "readelf -n: no floppy_build note in $so"

# 5 files and 3 directories counting the root; a symlink is left out.
mkdir -p "$tmpdir/d/one/two"
for f in a b c one/d one/two/e; do echo "$f" > "$tmpdir/d/$f"; done
ln -s a "$tmpdir/d/link"

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:floppy_build {
  printf("build %d %d %d %d %d\n", pid, arg0, arg1, arg2, arg3);
}
BT
start_bpftrace 60 "$tmpdir/bt.out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - floppy "$tmpdir/d" size=64M \
  --run 'echo $PPID > '"$tmpdir/pid"'; nbdinfo --size "$uri"' > "$tmpdir/size"
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/bt.out"
pid="$(cat "$tmpdir/pid")"

grep "^build $pid " "$tmpdir/bt.out" > "$tmpdir/ours" || :
[ "$(wc -l < "$tmpdir/ours")" = 1 ] ||
  fail "floppy_build fired $(wc -l < "$tmpdir/ours") times for server $pid"
read -r _ _ files dirs size ns < "$tmpdir/ours"
[ "$files" = 5 ] || fail "floppy_build: $files files, expected 5"
[ "$dirs" = 3 ] || fail "floppy_build: $dirs directories, expected 3"
[ "$size" = "$(cat "$tmpdir/size")" ] && [ "$size" = 67108864 ] ||
  fail "floppy_build: size $size, the export is $(cat "$tmpdir/size")"
[ "$ns" -gt 0 ] && [ "$ns" -lt 10000000000 ] ||
  fail "floppy_build: duration $ns ns is not plausible"
