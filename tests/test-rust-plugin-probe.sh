#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit::probe from a Rust plugin fires the server's generic probe
# "user": the example RAM disk calls it for each write with the name
# "ramdisk_write", the offset and the length, and bpftrace sees it with
# the (id, cookie) of the server's request_start for that write.  It
# would catch the binding failing to find nbdkit_probe at run time (the
# probe would silently not fire) or passing the arguments in the wrong
# order.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh timeout
requires_root
requires_probes
[ -x /usr/bin/cargo ] || { echo "$0: SKIP: /usr/bin/cargo (Debian's cargo) is not installed"; exit 77; }

cp -r "$abs_top_srcdir/plugins/rust" "$tmpdir/crate"
rm -rf "$tmpdir/crate/target"
( cd "$tmpdir/crate" &&
  CARGO_HOME="$tmpdir/cargo-home" CARGO_TARGET_DIR="$tmpdir/target" \
  timeout 300 /usr/bin/cargo build --offline --release --example ramdisk -q ) \
  > "$tmpdir/build.log" 2>&1 || { cat "$tmpdir/build.log"; fail "cargo build failed"; }
ram="$tmpdir/target/release/examples/libramdisk.so"

tracing_lock
b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_start {
  printf("%llu start %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg5);
}
usdt:$b:nbdkit:user {
  printf("%llu user %d %d %s %d %d [%s]\n", nsecs, arg0, arg1, str(arg2),
         (int64) arg3, (int64) arg4, str(arg5));
}
BT
timeout -k 120 60 bpftrace "$tmpdir/trace.bt" > "$tmpdir/out" \
  2> "$tmpdir/out.err" &
bt=$!
cleanup_fn _kill_pid "$bt"
wait_for_bpftrace "$bt" "$tmpdir/out" "$tmpdir/out.err"

t timeout 60 "$NBDKIT" -U - "$ram" 1M \
  --run 'nbdsh -u "$uri" -c "h.pwrite(b\"z\" * 1000, 8192)"' ||
  fail "the Rust RAM disk under bpftrace failed"
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
cat "$tmpdir/sorted"
set -- $(awk '$1 == "start" && $4 == 1 && $5 == 8192' "$tmpdir/sorted")
[ "$#" -eq 5 ] || fail "no request_start for the write"
grep -q "^user $2 $3 ramdisk_write 8192 1000 \[\]\$" "$tmpdir/sorted" ||
  fail "no user probe ramdisk_write (8192, 1000) with the write's id $2 and cookie $3"
echo "OK"
