#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# NBDKit.probe from an OCaml plugin fires the server's generic probe
# "user": the example RAM disk calls it for each write (ramdisk_write,
# offset, length), and bpftrace sees it joined to the write's
# request_start.  It would catch the weak reference to nbdkit_probe
# resolving to nothing in our server, or the int64 arguments unboxed
# wrongly.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/binding-checks.sh"
source "$(dirname "$0")/ocaml-build.sh"
requires_cmd bpftrace nbdsh timeout
requires_root
requires_probes

ocaml_build ramdisk
binding_probe "$tmpdir/ramdisk.so"
echo OK
