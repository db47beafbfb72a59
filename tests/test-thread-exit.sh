#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# When the server exits, every connection thread has ended, its
# thread-local destructors included.  The test plugin's reads leave
# per-thread state whose destructor takes 200 ms and then writes a
# line; two connections, one after the other, then the server exits
# (captive mode): both lines must be there.  A server that only waited
# for the connection count and exited while the last thread was still
# running its destructors lost the line (and, for OpenSSL's per-thread
# state under libssh, showed a leak in the sanitizer build).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

so="$abs_top_builddir/tests/.libs/thread-exit-plugin.so"
[ -f "$so" ] || fail "$so was not built"
marker="$tmpdir/marker"
t "$NBDKIT" -U - "$so" file="$marker" \
  --run 'nbdsh -u "$uri" -c "h.pread(512, 0)" &&
         nbdsh -u "$uri" -c "h.pread(512, 4096)"' ||
  fail "the server failed"
cat "$marker" 2>/dev/null || :
n="$(grep -c '^destructor ran$' "$marker" 2>/dev/null || :)"
[ "${n:-0}" -eq 2 ] ||
  fail "${n:-0} of 2 connection threads ran their destructors before the server exited"
