#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A read past the end of the export gets EINVAL, and the next request on
# the same connection still works.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 1M
t nbdsh -u "$uri" -c - <<'PY'
import errno
size = h.get_size()
assert size == 1048576
h.pwrite(b"abcd", size - 4)
h.set_strict_mode(0)          # libnbd would refuse these itself
for count, offset in [(512, size - 256), (512, size), (4096, size + 4096),
                      (1, 2**63 - 1)]:
    try:
        h.pread(count, offset)
    except nbd.Error as ex:
        assert ex.errnum == errno.EINVAL, (count, offset, ex.errnum, ex)
    else:
        raise AssertionError("read of %d at %d succeeded" % (count, offset))
    # The connection is still good.
    assert h.pread(4, size - 4) == b"abcd"
PY
