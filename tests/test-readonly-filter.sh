#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=readonly: without readonly-file the export is read-only (the
# flag nbdinfo and nbdsh see, and a write sent anyway gets EPERM) and
# reads give the plugin's bytes; with readonly-file, writes, zeroes and
# trims fail with EPERM exactly while the file exists, switching both
# ways on one connection, and leave the data as it was.  An empty path
# is refused.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

# refused(name, fn): fn must fail with EPERM.
export REFUSED='
def refused(name, fn):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "EPERM", (name, e.errno)
    else:
        raise AssertionError("%s was not refused" % name)
'

# --- Read-only for good ----------------------------------------------------
t "$NBDKIT" -U - --filter=readonly data '1 2 3 @4096 "hello"' size=1M \
  --run 'nbdinfo --json "$uri"' > "$tmpdir/info"
grep -q '"is_read_only": true' "$tmpdir/info" ||
  fail "nbdinfo does not see a read-only export: $(cat "$tmpdir/info")"

t "$NBDKIT" -U - --filter=readonly data '1 2 3 @4096 "hello"' size=1M \
  --run 'nbdsh -u "$uri" -c "$REFUSED" -c -' <<'PY'
assert h.is_read_only()
assert h.pread(3, 0) == b"\1\2\3"
assert h.pread(5, 4096) == b"hello"
h.set_strict_mode(0)        # send the write anyway: the server refuses it
refused("write", lambda: h.pwrite(b"x" * 512, 0))
refused("zero", lambda: h.zero(512, 0))
refused("trim", lambda: h.trim(512, 0))
assert h.pread(3, 0) == b"\1\2\3"
PY

# --- Read-only while a file exists ------------------------------------------
ro="$tmpdir/ro"
start_server --filter=readonly memory 1M readonly-file="$ro"
RO="$ro" t nbdsh -u "$uri" -c "$REFUSED" -c - <<'PY'
import os
ro = os.environ["RO"]
assert not h.is_read_only()

h.pwrite(b"a" * 4096, 0)
h.pwrite(b"b" * 4096, 8192)
open(ro, "w").close()
refused("write", lambda: h.pwrite(b"x" * 512, 0))
refused("zero", lambda: h.zero(4096, 8192))
refused("trim", lambda: h.trim(4096, 0))
# Reads, flushes and cache requests are never refused; nothing changed.
assert h.pread(4096, 0) == b"a" * 4096
assert h.pread(4096, 8192) == b"b" * 4096
h.flush()
h.cache(4096, 0)
os.remove(ro)
h.zero(4096, 8192)
h.pwrite(b"c" * 512, 0)
assert h.pread(4096, 8192) == b"\0" * 4096
assert h.pread(513, 0) == b"c" * 512 + b"a"
# A symbolic link to the file counts as the file; a dangling one does not.
os.symlink(ro + ".target", ro)
h.pwrite(b"d", 0)
open(ro + ".target", "w").close()
refused("write via link", lambda: h.pwrite(b"e", 0))
assert h.pread(1, 0) == b"d"
PY
stop_server

refuses 'readonly-file' --filter=readonly memory 1M readonly-file= ||
  fail "an empty readonly-file was accepted"
