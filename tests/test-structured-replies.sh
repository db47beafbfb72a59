#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reads work with structured replies and without them
# (set_request_structured_replies(False)); only with them is block status
# (base:allocation) available.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server memory 4M
t nbdsh -u "$uri" -c 'h.pwrite(b"sr" * 2048, 65536)'

t nbdsh -c - <<PY
import errno
h.set_request_structured_replies(False)
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri("$uri")
assert not h.get_structured_replies_negotiated()
assert h.pread(4096, 65536) == b"sr" * 2048
assert not h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.set_strict_mode(0)
try:
    h.pread(512, h.get_size())        # error via a simple reply
except nbd.Error as ex:
    assert ex.errnum == errno.EINVAL, ex
else:
    raise AssertionError("read past end succeeded")
assert h.pread(4, 65536) == b"srsr"
PY

t nbdsh -c - <<PY
h.set_request_structured_replies(True)
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri("$uri")
assert h.get_structured_replies_negotiated()
assert h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
assert h.pread(4096, 65536) == b"sr" * 2048
seen = []
h.block_status(4 * 1024 * 1024, 0,
               lambda ctx, off, entries, err: seen.append(entries) or 0)
assert seen, "no block status reply"
PY
