#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# With -s the client talks to the server over its stdin and stdout, so
# a python script's print() must not reach stdout: the python plugin
# sends sys.stdout to stderr then.  A script printing at load and in
# open still serves, and its lines come out on stderr.  (Debian's
# nbdkit 1.32 python plugin lets them into the protocol: the client
# fails the handshake with "server did not send expected NBD magic".)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

cat > "$tmpdir/prints.py" <<'PY'
API_VERSION = 2
print("printed at load")

def open(readonly):
    print("printed in open")
    return 1

def get_size(h):
    return 4096

def pread(h, buf, offset, flags):
    buf[:] = b"p" * len(buf)
PY

t nbdsh -c "h.connect_command(['$NBDKIT', '-s', 'python', '$tmpdir/prints.py'])" \
  -c 'assert h.get_size() == 4096' \
  -c 'assert h.pread(512, 0) == b"p" * 512' 2> "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "nbdkit -s python: the client failed"; }
cat "$tmpdir/err"
grep -qx "printed at load" "$tmpdir/err" || fail "the load's print is lost"
grep -qx "printed in open" "$tmpdir/err" || fail "open's print is lost"
