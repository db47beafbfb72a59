#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tcl plugin's probes under bpftrace: tcl_call_start and
# tcl_call_done fire around each proc the script runs, with the
# connection id, the request's cookie (the one request_start gave that
# read; 0 for plugin_open), the proc's name, a duration, and for a
# failed proc the errno and message; the script's nbdkit_probe fires
# the server's user probe with its name, integers and text.  It would
# catch: probes fired with the wrong cookie (another thread's), a
# missing done probe on the error path, errno or message lost, the
# probe helper not registered or its arguments shifted.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh
requires_root
requires_probes
tracing_lock

so="$abs_top_builddir/plugins/tcl/.libs/nbdkit-tcl-plugin.so"
[ -f "$so" ] || fail "$so not built"
b="$server_binary"
script="$tmpdir/probe.tcl"
cat > "$script" <<'TCL'
proc plugin_open {readonly} { return h }
proc get_size {h} { return 1048576 }
proc pread {h count offset} {
    if {$offset == 8192} {
        error "disk full" {} {POSIX ENOSPC {no space}}
    }
    nbdkit_probe tclscript_read $count -$offset "read $count at $offset"
    after 2
    return [binary format x$count]
}
TCL

start_server tcl "$script"
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:request_start {
  printf(\"%llu start %d %d %d\n\", nsecs, arg0, arg1, arg5);
}
usdt:$so:nbdkit:tcl_call_start {
  printf(\"%llu cstart %d %d %s\n\", nsecs, arg0, arg1, str(arg2));
}
usdt:$so:nbdkit:tcl_call_done {
  printf(\"%llu cdone %d %d %s %d %d [%s]\n\", nsecs, arg0, arg1, str(arg2),
         arg3 > 1000000, arg4, str(arg5));
}
usdt:$b:nbdkit:user {
  printf(\"%llu user %d %d %s %d %d [%s]\n\", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}"
t nbdsh -u "$uri" -c '
h.pread(512, 4096)
try:
    h.pread(512, 8192)
    raise Exception("the read at 8192 did not fail")
except nbd.Error as e:
    assert e.errno == "ENOSPC", e.errno
' || fail "nbdsh failed under bpftrace"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
cat "$tmpdir/sorted"

set -- $(awk '$1 == "cstart" && $4 == "plugin_open"' "$tmpdir/sorted")
[ "$#" -eq 4 ] || fail "no tcl_call_start for plugin_open"
id=$2
[ "$id" -gt 0 ] && [ "$3" -eq 0 ] || fail "plugin_open: id $id, cookie $3"
grep -q "^cdone $id 0 plugin_open [01] 0 \[\]\$" "$tmpdir/sorted" ||
  fail "no tcl_call_done for plugin_open"
cookie_at ()
{
  awk -v id="$id" -v off="$1" '$1 == "start" && $2 == id && $4 == off { print $3 }' \
    "$tmpdir/sorted"
}
c1="$(cookie_at 4096)"
c2="$(cookie_at 8192)"
[ -n "$c1" ] && [ -n "$c2" ] || fail "no request_start for the reads"
grep -q "^cstart $id $c1 pread\$" "$tmpdir/sorted" ||
  fail "no tcl_call_start for the read at 4096 (cookie $c1)"
grep -q "^cdone $id $c1 pread 1 0 \[\]\$" "$tmpdir/sorted" ||
  fail "no tcl_call_done (> 1 ms, errno 0) for the read at 4096"
grep -q "^user $id $c1 tclscript_read 512 -4096 \[read 512 at 4096\]\$" \
  "$tmpdir/sorted" || fail "no user probe from nbdkit_probe"
grep -q "^cdone $id $c2 pread 0 28 \[disk full\]\$" "$tmpdir/sorted" ||
  fail "no tcl_call_done with ENOSPC and the message for the read at 8192"
echo "OK: the tcl plugin's probes"
