#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugins and filters are loaded so that one .so's functions cannot
# shadow another's: each is opened RTLD_LOCAL.  tests/layer-plugin.c
# and tests/trace-filter.c both export a function shadow_probe (1 in
# the plugin, 2 in the filter); each must call its own (with
# RTLD_GLOBAL the filter, loaded second, called the plugin's).
#
# The libraries a plugin brings with it are still made global: Debian's
# python plugin embeds libpython, and Python's C extension modules
# (_ctypes, zlib, _json, ...) do not link libpython but expect its
# symbols in the global scope.  A script importing them must run.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
plugin="$abs_builddir/.libs/layer-plugin.so"
filter="$abs_builddir/.libs/trace1-filter.so"
[ -f "$plugin" ] && [ -f "$filter" ] ||
  fail "test plugin or filter not built (make check builds them)"

t "$NBDKIT" -U - --filter="$filter" "$plugin" --run '
nbdsh -u "$uri" -c "print(h.pread(64, 0).rstrip(b\"\\0\").decode())"' \
  > "$tmpdir/out" 2> "$tmpdir/err"
grep -q 'shadow=1$' "$tmpdir/out" ||
  { cat "$tmpdir/out"; fail "the plugin did not call its own function"; }
grep -q '^trace: trace1 shadow=2$' "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "the filter called the plugin's function"; }

# Debian's python plugin (nbdkit-plugin-python, in .ci/deps).
python_plugin="$debian_plugindir/nbdkit-python-plugin.so"
requires test -f "$python_plugin"
cat > "$tmpdir/disk.py" <<'PY'
import ctypes
import hashlib
import json
import zlib

API_VERSION = 2
libc = ctypes.CDLL(None)
seed = json.dumps({"pid-ok": libc.getpid() > 0}).encode()
disk = bytearray((zlib.compress(seed) + hashlib.sha256(seed).digest())
                 .ljust(65536, b"\0"))

def open(readonly):
    return 1

def get_size(h):
    return len(disk)

def pread(h, buf, offset, flags):
    buf[:] = disk[offset:offset + len(buf)]
PY
# The embedded interpreter never frees all it allocates: in a sanitizer
# build, leaks from inside libpython are not ours to report.
echo 'leak:libpython' > "$tmpdir/lsan.supp"
LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$tmpdir/lsan.supp:print_suppressions=0" \
t "$NBDKIT" -U - "$python_plugin" script="$tmpdir/disk.py" --run '
nbdsh -u "$uri" -c "
import json, zlib
d = zlib.decompressobj()
seed = d.decompress(bytes(h.pread(4096, 0)))
assert json.loads(seed) == {\"pid-ok\": True}, seed
print(\"python plugin served\", seed)
"' || fail "the python plugin could not run a script importing C modules"
