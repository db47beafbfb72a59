#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The OCaml binding (plugins/ocaml): its example RAM disk, linked by
# Debian's ocamlopt with the PIC runtime, is an ordinary plugin .so
# that our server and Debian's nbdkit 1.32 both load, with the same
# bytes, size, flags and map after the same writes (our nbdkit_probe is
# referenced weakly, so the .so loads there too); the failing example
# shows NBDKit.Error's errno and other exceptions crossing the boundary
# (see tests/binding-checks.sh).  It would catch the record's fields
# read in the wrong order (the wrong callback called), a value not
# kept as a GC root (a crash after a collection: the session writes
# and reads enough to collect), or errno lost at the boundary; it also
# drives nbdkit 1.34..1.40's calls (tests/lang/server-calls.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
source "$(dirname "$0")/ocaml-build.sh"
requires_cmd nbdsh nbdinfo
[ -x /usr/bin/nbdkit ] || { echo "$0: SKIP: Debian's nbdkit is not installed"; exit 77; }

ocaml_build ramdisk failing
binding_same_bytes "$tmpdir/ramdisk.so"
binding_errors "$tmpdir/failing.so" \
  'pread: Failure("read at 2097152 panics on purpose")'
# NBDKit.disconnect, parse_probability and parse_delay (the failing
# example).
source "$(dirname "$0")/lang/server-calls.sh"
server_calls_check "$tmpdir/failing.so"
# The thread model is capped: OCaml 4 runs one callback at a time.
"$NBDKIT" "$tmpdir/ramdisk.so" --dump-plugin > "$tmpdir/dump"
grep -qx 'thread_model=serialize_all_requests' "$tmpdir/dump" ||
  { cat "$tmpdir/dump"; fail "the thread model is not serialize_all_requests"; }
echo OK
