#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Writes and zeroes past the end of the export fail with ENOSPC; a trim
# past the end fails too (ENOSPC, or EINVAL as the NBD spec and nbdkit 1.32
# have it: "SHOULD return NBD_EINVAL if it receives a read or trim request
# including one or more sectors beyond the size of the device").  Nothing
# inside the export is changed, and the connection goes on.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 1M
t nbdsh -u "$uri" -c - <<'PY'
import errno
size = h.get_size()
h.set_strict_mode(0)
h.pwrite(b"keep", size - 4)
ok = (errno.ENOSPC,)
for name, fn, ok in [
        ("pwrite", lambda: h.pwrite(b"y" * 512, size - 256), ok),
        ("pwrite-at-end", lambda: h.pwrite(b"y", size), ok),
        ("pwrite-far", lambda: h.pwrite(b"y" * 512, 2**62), ok),
        ("zero", lambda: h.zero(512, size - 256), ok),
        ("trim", lambda: h.trim(512, size - 256), (errno.ENOSPC, errno.EINVAL))]:
    try:
        fn()
    except nbd.Error as ex:
        assert ex.errnum in ok, (name, ex.errnum, ex)
        print(name, "->", ex)
    else:
        raise AssertionError(name + " past the end succeeded")
    assert h.pread(4, size - 4) == b"keep", name + " changed the data"
PY
