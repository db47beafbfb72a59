#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -r: the export is read-only, writes (and trim, zero) fail with EPERM,
# reads still work, and the advertised flags say read-only.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server -r memory 1M
t nbdsh -u "$uri" -c - <<'PY'
import errno
assert h.is_read_only(), "export not advertised as read-only"
# Send the requests even though the flags say read-only.
h.set_strict_mode(0)
for name, fn in [("pwrite", lambda: h.pwrite(b"x" * 512, 0)),
                 ("trim", lambda: h.trim(512, 0)),
                 ("zero", lambda: h.zero(512, 0))]:
    try:
        fn()
    except nbd.Error as ex:
        assert ex.errnum == errno.EPERM, (name, ex.errnum, ex)
        print(name, "->", ex)
    else:
        raise AssertionError(name + " succeeded on a read-only export")
assert h.pread(512, 0) == bytes(512)
PY
