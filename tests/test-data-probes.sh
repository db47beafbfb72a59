#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The data plugin's probe: data_parsed (size, bytes_set, duration_ns)
# fires once per server, when the disk is built, before the server
# listens; so bpftrace is attached to the plugin's .so first and the
# servers are started under it (each --run records its server's pid,
# $PPID there, to pick out its own event).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh readelf timeout
requires_root
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"
tracing_lock

so="$abs_top_builddir/plugins/data/.libs/nbdkit-data-plugin.so"
[ -f "$so" ] || fail "$so not built"
readelf -n "$so" | grep -q 'Name: data_parsed' ||
  fail "readelf -n: no data_parsed note in $so"

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:data_parsed {
  printf("parsed %d %llu %llu %lld\n", pid, arg0, arg1, arg2);
}
BT
start_bpftrace 60 "$tmpdir/bt.out" "$tmpdir/bt.err" "$tmpdir/trace.bt"

# An expression (4096 bytes set, disk 8192), base64 padded by size=,
# and a repeat cut by size= (only the bytes inside count).
t "$NBDKIT" -U - data '(0x55 0xaa)*2048 @8192' \
  --run "echo \$PPID > $tmpdir/pid1; nbdsh -u \"\$uri\" -c 'h.get_size()'"
t "$NBDKIT" -U - data base64=MTIz size=1M \
  --run "echo \$PPID > $tmpdir/pid2"
t "$NBDKIT" -U - data '(1 2 3)*1000000000000' size=1000 \
  --run "echo \$PPID > $tmpdir/pid3"
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/bt.out"

expect ()
{
  local pid
  pid="$(cat "$tmpdir/$1")"
  [ "$(grep -c "^parsed $pid " "$tmpdir/bt.out")" -eq 1 ] ||
    fail "data_parsed did not fire exactly once for server $pid"
  grep -Eq "^parsed $pid $2 $3 [1-9][0-9]*\$" "$tmpdir/bt.out" ||
    fail "data_parsed for server $pid: expected size $2, bytes_set $3"
}
expect pid1 8192 4096
expect pid2 1048576 3
expect pid3 1000 1000
