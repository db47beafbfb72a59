#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The vddk plugin's probes fire with the right arguments (bpftrace on
# the plugin's .so, by path, as vddk_library fires at start-up),
# against the stand-in VDDK library (vddk-stub.sh):
#   vddk_library (path, has QueryAllocatedBlocks, result): 1 for the
#     full library, 0 for VDDK 6.5's, -1 for one too old;
#   vddk_open (id, file, transport, result): "file" and 0 for a local
#     disk, "" and -1 for a missing one;
#   vddk_error (id, cookie, call, VixError, message): for the missing
#     file (as the connection opens: cookie 0) and for an injected read
#     error, with the client's id and the cookie of the read that
#     failed (one more than the block status request's);
#   vddk_query_blocks (id, cookie, start sector, sectors, blocks,
#     errno): one per block status request, with the chunks asked
#     about and the blocks found.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
source "$(dirname "$0")/vddk-stub.sh"

so="$abs_top_builddir/plugins/vddk/.libs/nbdkit-vddk-plugin.so"
[ -f "$so" ] || fail "$so not built"
cat > "$tmpdir/trace.bt" <<EOF
usdt:$so:nbdkit:vddk_library {
  printf("library %s %d %d\n", str(arg0), arg1, arg2); }
usdt:$so:nbdkit:vddk_open {
  printf("open %d %s [%s] %d\n", arg0, str(arg1), str(arg2), arg3); }
usdt:$so:nbdkit:vddk_error {
  printf("error %d %d %s %d %s\n", arg0, arg1, str(arg2), arg3, str(arg4)); }
usdt:$so:nbdkit:vddk_query_blocks {
  printf("query %d %d %d %d %d %d\n", arg0, arg1 > 0, arg2, arg3, arg4,
         arg5);
  printf("query_cookie %d %d\n", arg0, arg1); }
EOF
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

expect_fail t "$NBDKIT" -U - vddk libdir="$vddk60" "$disk" --run true \
  2>/dev/null
t "$NBDKIT" -U - vddk libdir="$vddk65" "$disk" --run true ||
  fail "vddk with VDDK 6.5's library"
expect_fail t "$NBDKIT" -U - vddk libdir="$vddk80" "$tmpdir/missing" \
  --run 'nbdinfo --size "$uri"' 2>/dev/null
VIXSTUB_BAD_SECTOR=0 \
t "$NBDKIT" -U - vddk libdir="$vddk80" "$disk" \
  --run 'nbdsh --base-allocation -u "$uri" -c -' <<'PY' || fail "the client failed"
h.block_status(2 * 1048576, 1048576, lambda *args: 0)
try:
    h.pread(512, 0)
    assert False, "read succeeded"
except nbd.Error:
    pass
PY
sleep 1
interrupt_tracer "$bt"
cat "$tmpdir/trace"

expect_line ()
{
  grep -Eqx -- "$1" "$tmpdir/trace" || fail "no line matching: $1"
}
expect_line "library $vddk60/lib64/libvixDiskLib.so.8 0 -1"
expect_line "library $vddk65/lib64/libvixDiskLib.so.6 0 0"
[ "$(grep -c "^library $vddk80/lib64/libvixDiskLib.so.8 1 0$" \
     "$tmpdir/trace")" -eq 2 ] || fail "not two loads of the full library"
expect_line "open [1-9][0-9]* $tmpdir/missing \[\] -1"
expect_line "error [1-9][0-9]* 0 VixDiskLib_Open 4 The file was not found \(stub error 4\)"
id="$(awk '$1 == "open" && $3 == "'"$disk"'" && $5 == 0 { print $2 }' \
  "$tmpdir/trace" | tail -1)"
[ -n "$id" ] || fail "no vddk_open for the client's connection"
expect_line "open $id $disk \[file\] 0"
# The request covers 2 MiB (4096 sectors) from sector 2048: 32 chunks,
# with data in the first and the last (two blocks).
expect_line "query $id 1 2048 4096 2 0"
cookie="$(awk -v id="$id" '$1 == "query_cookie" && $2 == id { print $3 }' \
  "$tmpdir/trace")"
[ -n "$cookie" ] || fail "no vddk_query_blocks cookie"
expect_line "error $id $((cookie + 1)) VixDiskLib_Read 90003 stub: injected I/O error \(stub error 90003\)"
