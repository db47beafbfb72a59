#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -v turns on debug messages on stderr; without -v the server is quiet
# on a good run.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

t "$NBDKIT" -U - memory 1M --run 'nbdinfo --size "$uri" >/dev/null' \
  2>"$tmpdir/quiet"
if [ -s "$tmpdir/quiet" ]; then
  cat "$tmpdir/quiet"; fail "server printed to stderr without -v"
fi

t "$NBDKIT" -v -U - memory 1M --run 'nbdinfo --size "$uri" >/dev/null' \
  2>"$tmpdir/verbose"
head -20 "$tmpdir/verbose"
[ "$(grep -ci debug "$tmpdir/verbose")" -ge 3 ] ||
  fail "-v printed fewer than 3 debug lines"
