#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit.Probe from a Go plugin fires the server's generic probe
# "user": the example RAM disk calls it for each write (ramdisk_write,
# offset, length), and bpftrace sees it joined to the write's
# request_start.  It would catch the weak reference to nbdkit_probe
# resolving to nothing in our server, or the arguments in the wrong
# order.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
source "$(dirname "$0")/golang-build.sh"
requires_cmd bpftrace nbdsh timeout
requires_root
requires_probes

golang_build ramdisk
binding_probe "$tmpdir/ramdisk.so"
echo OK
