#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A filter that answers get_size itself and never asks the layer below
# (tests/sizeless-filter.c, as decompressing filters are) may still
# read and write through: the server asks the size below itself to
# check those calls (it used to abort on an assertion).  A call the
# filter sends past the end of the layer below is that filter's bug:
# the client gets EINVAL, the log names the call, and the server goes
# on serving.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
filter="$abs_builddir/.libs/sizeless-filter.so"
[ -f "$filter" ] || fail "$filter not built (make check builds it)"

start_server --filter="$filter" memory 1M sizeless-size=2M \
  2> "$tmpdir/server.log"
out="$(t nbdsh -u "$uri" -c '
assert h.get_size() == 2 * 1024 * 1024
h.pwrite(b"\x5a" * 4096, 8192)
assert h.pread(4096, 8192) == b"\x5a" * 4096
assert h.pread(512, 0) == bytes(512)
h.set_strict_mode(0)
try:
    h.pread(512, 1024 * 1024 + 4096)     # inside 2M, past the 1M below
    print("read past the layer below succeeded")
except nbd.Error as e:
    print(e.errno)
print(h.pread(4, 8192))')"
[ "$out" = "$(printf "EINVAL\nbytearray(b'ZZZZ')")" ] ||
  fail "through a filter that never asked the size below: $out"
grep -q "pread of 512 bytes at 1052672 refused: outside the 1048576 bytes of the layer below (memory)" \
  "$tmpdir/server.log" || fail "no message naming the refused call"
kill -0 "$server_pid" || fail "the server stopped"
