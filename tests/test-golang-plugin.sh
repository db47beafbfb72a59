#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The Go binding (plugins/golang): its example RAM disk, built with
# Debian's go offline (-buildmode=c-shared), is an ordinary plugin .so
# that our server and Debian's nbdkit 1.32 both load, with the same
# bytes, size, flags and map after the same writes (our nbdkit_probe
# is referenced weakly, so the .so loads there too); the failing example
# shows errno and panics crossing the boundary (see
# tests/binding-checks.sh).  It would catch the callbacks wired from
# the wrong interfaces, errno lost at the boundary, or a panic escaping
# into the server; it also drives nbdkit 1.34..1.40's calls
# (tests/lang/server-calls.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
source "$(dirname "$0")/golang-build.sh"
requires_cmd nbdsh nbdinfo
[ -x /usr/bin/nbdkit ] || { echo "$0: SKIP: Debian's nbdkit is not installed"; exit 77; }

golang_build ramdisk failing
binding_same_bytes "$tmpdir/ramdisk.so"
binding_errors "$tmpdir/failing.so"
# nbdkit.Disconnect, ParseProbability and ParseDelay (the failing example).
source "$(dirname "$0")/lang/server-calls.sh"
server_calls_check "$tmpdir/failing.so"
echo OK
