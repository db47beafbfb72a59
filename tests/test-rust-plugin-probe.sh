#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit::probe from a Rust plugin fires the server's generic probe
# "user": the example RAM disk calls it for each write (ramdisk_write,
# offset, length), and bpftrace sees it joined to the write's
# request_start.  It would catch the crate failing to find nbdkit_probe
# at run time (the probe would silently not fire) or passing the
# arguments in the wrong order.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
requires_cmd bpftrace nbdsh timeout
requires_root
requires_probes
[ -x /usr/bin/cargo ] || { echo "$0: SKIP: /usr/bin/cargo (Debian's cargo) is not installed"; exit 77; }

cp -r "$abs_top_srcdir/plugins/rust" "$tmpdir/crate"
rm -rf "$tmpdir/crate/target" "$tmpdir/crate/Cargo.lock"
( cd "$tmpdir/crate" &&
  CARGO_HOME="$tmpdir/cargo-home" CARGO_TARGET_DIR="$tmpdir/target" \
  timeout 300 /usr/bin/cargo build --offline --release --example ramdisk -q ) \
  > "$tmpdir/build.log" 2>&1 || { cat "$tmpdir/build.log"; fail "cargo build failed"; }
binding_probe "$tmpdir/target/release/examples/libramdisk.so"
echo OK
