#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example filter's probes fire under bpftrace with the right
# arguments: example_filter_open with the connection id and the export
# name; example_filter_read_done for each read with the (id, cookie) of
# the server's request_start for that read, its offset and count, a
# time > 0 and errno 0; example_filter_write_done with ENOSPC for a
# write that the error filter below it fails.  It would catch: the
# probes missing from the .so, the clock not read while traced, the
# errno of the layers below lost, ids that do not join the server's.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh timeout

b="$server_binary"
so="$(filter_so example)"

start_server --filter=example --filter=error example 1M \
  error-pwrite=ENOSPC error-pwrite-rate=1
trace_start "$tmpdir/out" "
usdt:$b:nbdkit:request_start {
  printf(\"%llu start %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$so:nbdkit:example_filter_open {
  printf(\"%llu open %d '%s' %d\n\", nsecs, arg0, str(arg1), arg2);
}
usdt:$so:nbdkit:example_filter_read_done {
  printf(\"%llu read %d %d %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3,
         arg4 > 0 ? 1 : 0, arg5);
}
usdt:$so:nbdkit:example_filter_write_done {
  printf(\"%llu write %d %d %d %d %d %d\n\", nsecs, arg0, arg1, arg2, arg3,
         arg4 > 0 ? 1 : 0, arg5);
}"
t nbdsh -u "nbd+unix:///myexport?socket=$sock" -c '
h.pread(512, 0)
h.pread(4096, 8192)
try:
    h.pwrite(b"x" * 1024, 65536)
    raise Exception("the write did not fail")
except nbd.Error as e:
    assert e.errno == "ENOSPC", e.errno
' || fail "nbdsh failed"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
cat "$tmpdir/sorted"

set -- $(awk '$1 == "open"' "$tmpdir/sorted")
[ "$#" -eq 4 ] && [ "$2" -gt 0 ] && [ "$3" = "'myexport'" ] && [ "$4" -eq 0 ] ||
  fail "no example_filter_open (id > 0, 'myexport', read-write 0)"
id=$2
for r in "0 512" "8192 4096"; do
  set -- $r
  off=$1 count=$2
  set -- $(awk -v off="$off" '$1 == "read" && $4 == off' "$tmpdir/sorted")
  [ "$#" -eq 7 ] || fail "no example_filter_read_done at $off"
  [ "$2" -eq "$id" ] || fail "read at $off: id $2, the open's was $id"
  [ "$5 $6 $7" = "$count 1 0" ] ||
    fail "read at $off: count, time > 0, errno are '$5 $6 $7'," \
         "expected '$count 1 0'"
  grep -q "^start $id $3 0 $off\$" "$tmpdir/sorted" ||
    fail "read at $off: cookie $3 is not that of its request_start"
done
set -- $(awk '$1 == "write"' "$tmpdir/sorted")
[ "$#" -eq 7 ] || fail "no example_filter_write_done"
[ "$2 $4 $5 $7" = "$id 65536 1024 28" ] ||
  fail "write: id, offset, count, errno are '$2 $4 $5 $7'," \
       "expected '$id 65536 1024 28' (ENOSPC)"
grep -q "^start $id $3 1 65536\$" "$tmpdir/sorted" ||
  fail "write: cookie $3 is not that of its request_start"
echo "OK: the example filter's probes fire with the right arguments"
