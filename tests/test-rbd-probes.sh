#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's probes, seen by bpftrace: rbd_connect fires when the
# server joins the cluster (image "") and opens the image, with a
# duration and result 0; rbd_op_done fires once per librbd call of a
# request, with the connection id and cookie of the server's own
# request_start for that request, the op, offset and count, a non-zero
# latency, and a FUA write fires a write then a flush; rbd_op_error
# (librbd's negative result) fires for none of them, as none fails.
# Would catch: probes missing or misplaced, arguments swapped,
# a cookie that does not join to request_start, a latency never
# measured, the semaphore ignored.
source "$(dirname "$0")/functions.sh"
requires_root
requires_probes
requires_cmd bpftrace nbdsh nbdinfo
source "$srcdir/rbd-functions.sh"
requires sh -c "readelf -n '$rbd_so' | grep -q 'Name: rbd_op_done'"
img=$(new_image probes 8M)
tracing_lock

cat > "$tmpdir/trace.bt" <<EOT
usdt:$rbd_so:nbdkit:rbd_connect {
  printf("%lld connect %s %s %d %d\n", nsecs, str(arg0), str(arg1),
         arg2 > 0, arg3); }
usdt:$rbd_so:nbdkit:rbd_op_error {
  printf("%lld error %d %d %s %d\n", nsecs, arg0, arg1, str(arg2), arg3); }
usdt:$rbd_so:nbdkit:rbd_op_done {
  printf("%lld op %d %d %s %d %d %d\n", nsecs, arg0, arg1, str(arg2),
         arg3, arg4, arg5 > 0); }
usdt:$server_binary:nbdkit:request_start {
  printf("%lld req %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3); }
usdt:$server_binary:nbdkit:connection_close {
  printf("%lld close %d\n", nsecs, arg0); }
EOT
start_bpftrace 90 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

start_server rbd "${rbd_args[@]}" image="$img"
t nbdsh --base-allocation -u "$uri" -c '
h.pwrite(b"p" * 4096, 8192, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 8192) == b"p" * 4096
h.trim(65536, 1048576)
h.zero(4096, 2 * 1048576)
h.flush()
h.block_status(8 * 1048576, 0, lambda *args: 0)
'
# A server stopped while a client is still connected flushes the
# connection's writes outside any request, as it should; wait for the
# connection to close first, so the ops below are the client's.
wait_for_output "$tmpdir/trace" ' close [0-9]+$' "$bt" 30 ||
  fail "no connection_close after the client left"
stop_server
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/trace" > "$tmpdir/events"
cat "$tmpdir/events"

# Start-up: the cluster, then the check that image= exists; then the
# first connection opens it.
grep -c "^connect $RBD_POOL  1 0\$" "$tmpdir/events" | grep -qx 1 ||
  fail "no rbd_connect (pool, \"\", duration > 0, 0) for the cluster"
[ "$(grep -c "^connect $RBD_POOL $img 1 0\$" "$tmpdir/events")" -eq 2 ] ||
  fail "want two rbd_connect ($RBD_POOL, $img, duration > 0, 0)"

# Each op in order, without id and cookie, which are checked below.
grep '^op ' "$tmpdir/events" | cut -d' ' -f4- > "$tmpdir/ops"
cat > "$tmpdir/want" <<EOT
write 8192 4096 1
flush 0 0 1
read 8192 4096 1
discard 1048576 65536 1
write_zeroes 2097152 4096 1
flush 0 0 1
diff_iterate 0 8388608 1
EOT
diff -u "$tmpdir/want" "$tmpdir/ops" || fail "rbd_op_done: wrong ops or arguments"
! grep '^error ' "$tmpdir/events" || fail "rbd_op_error fired for an op that worked"

# Each op's (id, cookie) is that of a request_start of the right kind.
/usr/bin/python3 - "$tmpdir/events" <<'EOT' || fail "rbd_op_done does not join to request_start"
import sys
reqs = {}
kind = {"write": "write", "read": "read", "discard": "trim",
        "write_zeroes": "write_zeroes", "flush": ("flush", "write"),
        "diff_iterate": "block_status"}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "req":
        # request_start's command code, as its name
        reqs[(f[1], f[2])] = {"0": "read", "1": "write", "3": "flush",
                              "4": "trim", "6": "write_zeroes",
                              "7": "block_status"}.get(f[3], f[3])
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] != "op":
        continue
    name = reqs.get((f[1], f[2]))
    want = kind[f[3]]
    ok = name is not None and (name in want if isinstance(want, tuple)
                               else name == want)
    if not ok:
        sys.exit("op %s id %s cookie %s: request %s" % (f[3], f[1], f[2], name))
EOT
