#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin's probes join the server's: the example plugin passes
# nbdkit_connection_id () and nbdkit_request_cookie () first in
# example_read and example_write, and fires the generic probe "user"
# (nbdkit_probe) at its first write.  Under bpftrace, each example_read
# must carry the (id, cookie) of the server's request_start for that
# very read (same offset), looked up in a bpftrace map keyed by
# (id, cookie) as an operator would, and the user probe must carry the
# write's (id, cookie), its name, offset, count and text.  It would
# catch: ids or cookies of 0 or of another request (the thread-local
# cookie not set, or read from the wrong thread), nbdkit_probe not
# firing or mixing up its arguments.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh timeout

b="$server_binary"
so="$abs_top_builddir/plugins/example/.libs/nbdkit-example-plugin.so"
[ -f "$so" ] || fail "$so not built"

reads=(0 4096 8192 16384)
py="h.pwrite(b'x' * 1000, 65536)"
for off in "${reads[@]}"; do
  py="$py; h.pread(512, $off)"
done

cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_start {
  @off[arg0, arg1] = arg3 + 1;
  printf("%llu start %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$so:nbdkit:example_read {
  printf("%llu read %d %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3,
         @off[arg0, arg1]);
}
usdt:$so:nbdkit:example_write {
  printf("%llu write %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3);
}
usdt:$b:nbdkit:user {
  printf("%llu user %d %d %s %d %d %s\n", nsecs, arg0, arg1, str(arg2),
         arg3, arg4, str(arg5));
}
END { clear(@off); }
BT
start_server example 1M
trace_start "$tmpdir/out" "$(cat "$tmpdir/trace.bt")"
t nbdsh -u "$uri" -c "$py" || fail "nbdsh failed"
sleep 1
trace_stop
trace_in_order "$tmpdir/out" \
  > "$tmpdir/sorted"
cat "$tmpdir/sorted"

# Every read the client made reached the plugin, joined to its
# request_start by (id, cookie): bpftrace's map gave back offset + 1.
for off in "${reads[@]}"; do
  line="$(awk -v off="$off" '$1 == "read" && $4 == off' "$tmpdir/sorted")"
  [ -n "$line" ] || fail "no example_read at $off"
  set -- $line
  id=$2 cookie=$3 joined=$6
  [ "$id" -gt 0 ] || fail "example_read at $off: connection id $id"
  [ "$joined" -eq $(( off + 1 )) ] ||
    fail "example_read at $off (id $id, cookie $cookie) did not join" \
         "the request_start of that read (map gave $joined)"
  grep -q "^start $id $cookie 0 $off\$" "$tmpdir/sorted" ||
    fail "no request_start $id $cookie for a read (0) at $off"
done
n="$(awk '$1 == "read"' "$tmpdir/sorted" | sort -u -k3,3 | wc -l)"
[ "$n" -eq "${#reads[@]}" ] || fail "$n distinct cookies, expected ${#reads[@]}"

# The write, and the generic probe fired inside it.
set -- $(awk '$1 == "write" && $4 == 65536' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no example_write at 65536"
id=$2 cookie=$3
grep -q "^start $id $cookie 1 65536\$" "$tmpdir/sorted" ||
  fail "example_write's (id $id, cookie $cookie) is not a write's request_start"
grep -q "^user $id $cookie example_first_write 65536 1000 the disk is no longer all zeroes\$" \
  "$tmpdir/sorted" ||
  fail "no user probe (example_first_write) with the write's id and cookie"
[ "$(grep -c '^user ' "$tmpdir/sorted")" -eq 1 ] ||
  fail "the user probe fired more than once"
echo "OK: the plugin's probes join the server's by (id, cookie)"
