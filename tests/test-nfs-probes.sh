#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nfs plugin's probes fire with the right arguments (bpftrace on
# the plugin's .so, by path, as nfs_connect also fires at start-up),
# against a private nfs-ganesha (tests/nfs-ganesha.sh):
#   nfs_connect (id, server, file, duration ns, result): -1 at start-up
#     (id 0) for a missing file, 0 for a good one, then 0 for the
#     client's connection with its id;
#   nfs_error (id, cookie, call, errno, message): nfs_open with ENOENT
#     (2) and libnfs's message at start-up (id and cookie 0), nfs_pread
#     with EIO (5) for the client's read once ganesha is killed, with
#     the id and cookie of that read's request_start.
source "$(dirname "$0")/nfs-ganesha.sh"
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
start_ganesha
head -c 1048576 /dev/urandom > "$nfs_rw/disk.img"

so="$abs_top_builddir/plugins/nfs/.libs/nbdkit-nfs-plugin.so"
[ -f "$so" ] || fail "$so not built"
cat > "$tmpdir/trace.bt" <<EOF
usdt:$so:nbdkit:nfs_connect {
  printf("connect %d %s %s %d %d\n", arg0, str(arg1), str(arg2), arg3 > 0,
         arg4); }
usdt:$so:nbdkit:nfs_error {
  printf("error %d %d %s %d %s\n", arg0, arg1, str(arg2), arg3, str(arg4)); }
usdt:$server_binary:nbdkit:request_start {
  printf("start %d %d %d %llu\n", pid, arg0, arg1, nsecs); }
EOF
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

expect_fail t "$NBDKIT" -U - nfs "$nfs_url/export/missing.img" --run true \
  2>/dev/null
start_server nfs "$nfs_url/export/disk.img"
pid="$server_pid"
t nbdsh -u "$uri" -c - <<PY || fail "the client failed"
import os
h.pread(4096, 0)
os.kill($ganesha_pid, 9)
try:
    h.pread(4096, 4096)
    assert False, "read succeeded with ganesha dead"
except nbd.Error:
    pass
PY
stop_server
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/trace"

expect_line ()
{
  grep -Eqx -- "$1" "$tmpdir/trace" || fail "no line matching: $1"
}
expect_line "connect 0 127.0.0.1 /missing.img 1 -1"
expect_line "error 0 0 nfs_open 2 open call failed with .+"
expect_line "connect 0 127.0.0.1 /disk.img 1 0"
id="$(awk '$1 == "connect" && $2 != 0 && $6 == 0 { print $2; exit }' \
  "$tmpdir/trace")"
[ -n "$id" ] || fail "no nfs_connect for the client's connection"
expect_line "connect $id 127.0.0.1 /disk.img 1 0"
# The second read of the client's connection (in time order) is the one
# that failed.
cookie="$(awk -v p="$pid" -v id="$id" \
  '$1 == "start" && $2 == p && $3 == id { print $5, $4 }' "$tmpdir/trace" |
  sort -n | sed -n '2s/.* //p')"
[ -n "$cookie" ] && [ "$cookie" != 0 ] ||
  fail "no request_start for the failed read"
expect_line "error $id $cookie nfs_pread 5 .+"
