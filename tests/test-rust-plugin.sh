#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The Rust binding (plugins/rust): its example RAM disk, built with
# Debian's cargo offline, is an ordinary plugin .so that our server and
# Debian's nbdkit 1.32 both load, with the same bytes, size, flags and
# map after the same writes (nbdkit 1.32 lacks our nbdkit_probe, which
# the crate looks up at run time, so the .so must load there too); the
# failing example shows errno and panics crossing the boundary (see
# tests/binding-checks.sh).  It would catch a plugin structure whose
# layout differs from the C one (wrong callback called, or a crash),
# errno lost at the boundary, or a panic unwinding into the server; it
# also drives nbdkit 1.34..1.40's calls (tests/lang/server-calls.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
requires_cmd nbdsh nbdinfo
[ -x /usr/bin/cargo ] || { echo "$0: SKIP: /usr/bin/cargo (Debian's cargo) is not installed"; exit 77; }
[ -x /usr/bin/nbdkit ] || { echo "$0: SKIP: Debian's nbdkit is not installed"; exit 77; }

# A copy of the crate: cargo writes Cargo.lock beside Cargo.toml.
cp -r "$abs_top_srcdir/plugins/rust" "$tmpdir/crate"
rm -rf "$tmpdir/crate/target" "$tmpdir/crate/Cargo.lock"
( cd "$tmpdir/crate" &&
  CARGO_HOME="$tmpdir/cargo-home" CARGO_TARGET_DIR="$tmpdir/target" \
  timeout 300 /usr/bin/cargo build --offline --release --examples -q ) \
  > "$tmpdir/build.log" 2>&1 || { cat "$tmpdir/build.log"; fail "cargo build failed"; }
ram="$tmpdir/target/release/examples/libramdisk.so"
bad="$tmpdir/target/release/examples/libfailing.so"
[ -f "$ram" ] && [ -f "$bad" ] || fail "the examples were not built"

binding_same_bytes "$ram"
binding_errors "$bad"
# nbdkit::disconnect, parse_probability and parse_delay (the failing
# example).
source "$(dirname "$0")/lang/server-calls.sh"
server_calls_check "$bad"
echo OK
