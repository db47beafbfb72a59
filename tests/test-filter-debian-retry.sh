#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Debian's retry filter reopens the layers below it after a failure,
# by hand: nbdkit_context_get_backend, nbdkit_next_context_open,
# nbdkit_context_set_next and nbdkit_next_context_close.  Below it,
# Debian's error filter fails every read while a trigger file exists,
# over tests/layer-plugin.c (which counts its opens).  A read made
# while the trigger exists fails, is retried on fresh contexts, and
# succeeds once the trigger is gone; the plugin was opened again for
# it, and the server kept serving.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-retry-filter.so"
plugin="$abs_builddir/.libs/layer-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"

trigger="$tmpdir/fail-reads"
touch "$trigger"
t "$NBDKIT" -U - --filter="$fdir/nbdkit-retry-filter.so" \
  --filter="$fdir/nbdkit-error-filter.so" "$plugin" \
  error-pread=EIO error-pread-rate=100% error-pread-file="$trigger" \
  retries=10 retry-delay=1 retry-exponential=no \
  --run "(sleep 1.5; rm $trigger) &
         nbdsh -u \"\$uri\" -c 'print(h.pread(40, 0).rstrip(b\"\\0\").decode())'
         nbdsh -u \"\$uri\" -c 'h.pread(512, 4096)'
         wait" > "$tmpdir/out" 2> "$tmpdir/err" || {
  cat "$tmpdir/out" "$tmpdir/err"
  fail "a read through retry did not succeed"
}
cat "$tmpdir/out"
grep -q 'injecting EIO error into pread' "$tmpdir/err" ||
  fail "the error filter never failed a read: nothing was retried"
opens="$(sed -n 's/^opens=\([0-9]*\) .*/\1/p' "$tmpdir/out")"
[ -n "$opens" ] && [ "$opens" -ge 2 ] ||
  fail "retry did not reopen the plugin (opens=$opens)"
