#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The memoryviews the python plugin hands to pread and pwrite (API 2)
# are the server's own buffers, valid only during the call.  A script
# that keeps one (the view itself, or a slice of it) fails that request
# with EIO and a log line saying so, and the view it kept is released:
# touching it later raises ValueError instead of reading or writing
# memory the server has reused.  pwrite's view is read-only.  Requests
# that keep nothing are unaffected.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

cat > "$tmpdir/keeper.py" <<'PY'
import nbdkit

API_VERSION = 2
disk = bytearray(1024 * 1024)
kept = []

def open(readonly):
    return 1

def get_size(h):
    return len(disk)

def pread(h, buf, offset, flags):
    if offset == 0:
        kept.append(buf)               # the view itself
    elif offset == 512:
        kept.append(buf[0:16])         # a slice of it
    elif offset == 1024:
        # What became of the views kept before.
        for i, v in enumerate(kept):
            try:
                v[0]
                state = "K"            # kept, still usable
            except ValueError:
                state = "X"            # released
            disk[2048 + i] = ord(state)
    buf[:] = disk[offset:offset + len(buf)]

def pwrite(h, buf, offset, flags):
    try:
        buf[0] = 0
        disk[4096] = ord("w")
    except TypeError:
        disk[4096] = ord("r")
    if offset == 8192:
        kept.append(buf)
    disk[offset:offset + len(buf)] = buf
PY

start_server -f python "$tmpdir/keeper.py" 2> "$tmpdir/server.err"
t nbdsh -u "$uri" -c '
def eio(fn):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "EIO", e.errno
        return
    raise Exception("no error")
eio(lambda: h.pread(512, 0))
eio(lambda: h.pread(512, 512))
h.pread(512, 1024)
eio(lambda: h.pwrite(b"x" * 512, 8192))
h.pwrite(b"y" * 512, 12288)
got = h.pread(4096, 2048)
print(got[0:3], got[2048:2049])
assert got[0:2] == b"XX", "the kept views are still usable: %r" % got[0:2]
assert got[2048:2049] == b"r", "pwrite could write into its buffer"
assert h.pread(512, 12288) == b"y" * 512
'
kill -0 "$server_pid" || fail "the server died"
cat "$tmpdir/server.err"
n="$(grep -c 'kept a reference to the buffer after returning' \
  "$tmpdir/server.err" || :)"
[ "$n" -eq 3 ] || fail "$n log lines about kept buffers, expected 3"
