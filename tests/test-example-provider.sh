#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin names its own provider: the example plugin built with
# -DNBDKIT_PROBE_PROVIDER=myplugin has its probes under "myplugin"
# (readelf, bpftrace -l), bpftrace attaches to
# usdt:SO:myplugin:example_read and sees each read with its offset and
# count, and example_flush, whose costly argument is computed only when
# the semaphore (now myplugin_example_flush_semaphore) is raised, fires
# with its request's id and cookie and the number of blocks holding
# data.  It would catch: the macro
# ignored (probes under nbdkit), semaphores left under the old name
# (the flush probe would never fire), arguments lost.
source "$(dirname "$0")/functions.sh"
requires_cmd gcc readelf bpftrace nbdsh timeout
requires_root
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"
tracing_lock

so="$tmpdir/nbdkit-example-plugin.so"
gcc -Wall -Werror -fPIC -shared -DNBDKIT_PROBE_PROVIDER=myplugin \
  -I"$abs_top_srcdir/include" -I"$abs_top_builddir/include" \
  "$abs_top_srcdir/plugins/example/example.c" -o "$so" ||
  fail "the example plugin did not build with its own provider"

readelf -n "$so" | awk '/Provider:/ { p = $2 } /Name:/ { print p ":" $2 }' \
  > "$tmpdir/notes"
cat "$tmpdir/notes"
grep -qx 'myplugin:example_read' "$tmpdir/notes" ||
  fail "readelf: no myplugin:example_read"
! grep -q '^nbdkit:' "$tmpdir/notes" || fail "readelf: probes left under nbdkit"
bpftrace -l "usdt:$so:*" > "$tmpdir/list" 2>&1
grep -q "myplugin:example_read\$" "$tmpdir/list" ||
  { cat "$tmpdir/list"; fail "bpftrace -l does not list myplugin:example_read"; }

start_server "$so" 1M
trace_start "$tmpdir/out" "
usdt:$so:myplugin:example_read {
  printf(\"%llu read %d %d\n\", nsecs, arg2, arg3);
}
usdt:$so:myplugin:example_flush {
  printf(\"%llu flush %d %d %d %d\n\", nsecs, arg0 > 0 && arg1 > 0, arg2, arg3,
         arg4);
}"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 8192, 4096)
h.pread(512, 0)
h.pread(1024, 12288)
h.flush()
' || fail "nbdsh failed"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
cat "$tmpdir/sorted"
printf 'read 0 512\nread 12288 1024\nflush 1 2 1 2\n' > "$tmpdir/expected"
diff -u "$tmpdir/expected" "$tmpdir/sorted" ||
  fail "usdt:SO:myplugin:* did not fire as expected (reads, then a flush" \
       "with its id and cookie after 2 reads and 1 write with blocks 1" \
       "and 2 holding data)"
echo "OK: the plugin's own provider myplugin works under bpftrace"
