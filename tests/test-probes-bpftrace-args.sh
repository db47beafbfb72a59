#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bpftrace 0.17 (Debian 12) reads only arg0..arg5 of a USDT probe, so
# every server probe has at most six arguments, and the offset, count
# and flags of request_start and the offset and count of
# layer_call_start are among them.  First, with readelf: no probe of
# provider nbdkit in the server binary has more than six arguments.
# Then bpftrace, attached to one server (an offset filter that shifts
# by 4 GiB over a sparse memory plugin), reads by number:
#   request_start    (id, cookie, command, offset, count, flags)
#   layer_call_start (id, cookie, layer, callback, offset, count)
# for a read of 4096 bytes at 5 GiB and a 512-byte write with FUA at
# 12288, and the values must be exact: the plugin sees the offset plus
# 4 GiB (a 64-bit value: printed with %llu, as bpftrace's %d keeps
# only 32 bits), the write's flags are NBD_CMD_FLAG_FUA (1).
# It would catch a seventh argument, arguments in another order, an
# offset truncated to 32 bits, flags or count not passed.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf

readelf -n -W "$server_binary" > "$tmpdir/notes" ||
  fail "readelf -n $server_binary failed"
awk '
  /Provider:/ { prov = $NF }
  /^ *Name:/ { name = $2 }
  /^ *Arguments:/ && prov == "nbdkit" {
    n++
    if (NF - 1 > 6) { print name ": " NF - 1 " arguments"; bad = 1 }
  }
  END { if (n < 20) { print "only " n " probes with arguments"; bad = 1 }
        exit bad }' "$tmpdir/notes" ||
  fail "a server probe has more than six arguments (bpftrace 0.17 reads six)"

requires_tracer nbdsh timeout

start_server --filter=offset memory 16G offset=4G
trace_start "$tmpdir/out" '
usdt:*:nbdkit:request_start /arg2 <= 1/ {
  printf("%llu start %d %d %d %llu %d %d\n", nsecs, arg0, arg1, arg2, arg3,
         arg4, arg5);
}
usdt:*:nbdkit:layer_call_start /arg1 != 0/ {
  printf("%llu call %d %d %s %s %llu %d\n", nsecs, arg0, arg1, str(arg2),
         str(arg3), arg4, arg5);
}
usdt:*:nbdkit:connection_close { printf("%llu close %d\n", nsecs, arg0); }'
t nbdsh -u "$uri" -c '
h.pread(4096, 5 * 1024**3)
h.pwrite(b"w" * 512, 12288, nbd.CMD_FLAG_FUA)
assert h.pread(512, 12288) == b"w" * 512
' || fail "nbdsh failed"
trace_stop_at_close

# Lines without the id and cookie, which the client and the server
# choose: the same for any run.
awk '$1 != "close" { $2 = ""; $3 = ""; print }' "$tmpdir/got" |
  tr -s ' ' > "$tmpdir/values"
cat > "$tmpdir/want" <<'EOF'
start 0 5368709120 4096 0
call offset pread 5368709120 4096
call memory pread 9663676416 4096
start 1 12288 512 1
call offset pwrite 12288 512
call memory pwrite 4294979584 512
start 0 12288 512 0
call offset pread 12288 512
call memory pread 4294979584 512
EOF
diff -u "$tmpdir/want" "$tmpdir/values" ||
  fail "request_start or layer_call_start: wrong arguments by number"

# Every call carries the (id, cookie) of the request_start before it.
awk '$1 == "start" { k = $2 " " $3 }
     $1 == "call" && $2 " " $3 != k { print "line " NR ": " $0; bad = 1 }
     END { exit bad }' "$tmpdir/got" ||
  fail "a layer_call_start's (id, cookie) is not its request's"
echo "OK: bpftrace reads offset, count and flags of request_start and layer_call_start"
