#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cow filter's probes fire under bpftrace with the right arguments:
# a partial write to a block not yet in the overlay copies it up
# (cow_copy_up offset, count, blocknum, after cow_read_through of the
# whole block); a read of an unwritten block reads through exactly the
# bytes asked for; a read of a written block is served by the overlay;
# with cow-on-read=true a read copies its block up, once.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh readelf
tracing_lock

so="$(filter_so cow)"
for p in cow_copy_up cow_read_through cow_read_overlay; do
  readelf -n "$so" | grep -q "Name: $p\$" || fail "no probe $p in $so"
done

disk="$tmpdir/disk.img"
/usr/bin/python3 -c '
import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(1 << 20)))
' > "$disk"
start_server --filter=cow file "$disk"
out="$tmpdir/trace"
trace_start "$out" "
usdt:$so:nbdkit:cow_copy_up /arg0 != 0 && arg1 != 0/ { printf(\"copy_up %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:cow_read_through /arg0 != 0 && arg1 != 0/ { printf(\"read_through %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:cow_read_overlay /arg0 != 0 && arg1 != 0/ { printf(\"read_overlay %d %d\\n\", arg2, arg3); }
"
t nbdsh -u "$uri" -c '
h.pwrite(b"x" * 100, 131072 + 10)
h.pread(4096, 200000 + 65536 * 3)
assert h.pread(50, 131072 + 5) == bytes((131077 + i) % 251 for i in range(5)) + b"x" * 45
'
trace_stop
cat "$out"
expect ()
{
  grep -qx "$1" "$out" || fail "no line '$1' in the trace"
}
expect "copy_up 131072 65536 2"
expect "read_through 131072 65536"
expect "read_through 396608 4096"
expect "read_overlay 131077 50"
[ "$(grep -c copy_up "$out")" -eq 1 ] || fail "copy_up fired more than once"

# cow-on-read: a read of a block not in the overlay copies the whole
# block up (reading it through), and the next read is the overlay's.
stop_server
start_server --filter=cow file "$disk" cow-on-read=true
out="$tmpdir/trace2"
trace_start "$out" "
usdt:$so:nbdkit:cow_copy_up /arg0 != 0 && arg1 != 0/ { printf(\"copy_up %d %d %d\\n\", arg2, arg3, arg4); }
usdt:$so:nbdkit:cow_read_through /arg0 != 0 && arg1 != 0/ { printf(\"read_through %d %d\\n\", arg2, arg3); }
usdt:$so:nbdkit:cow_read_overlay /arg0 != 0 && arg1 != 0/ { printf(\"read_overlay %d %d\\n\", arg2, arg3); }
"
t nbdsh -u "$uri" -c '
assert h.pread(10, 196608 + 5) == bytes((196613 + i) % 251 for i in range(10))
assert h.pread(10, 196608 + 50) == bytes((196658 + i) % 251 for i in range(10))
'
trace_stop
cat "$out"
expect "read_through 196608 65536"
expect "copy_up 196608 65536 3"
expect "read_overlay 196658 10"
[ "$(grep -c read_through "$out")" -eq 1 ] ||
  fail "cow-on-read read the plugin more than once"
