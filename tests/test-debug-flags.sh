#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -D NAME.FLAG=N and -t THREADS are accepted as nbdkit 1.32 accepts them:
# a debug flag the plugin does not have is a warning, not an error.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

t "$NBDKIT" -t 4 -U - memory 1M --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
grep -qx 1048576 "$tmpdir/size" || fail "-t 4 broke the server"

t "$NBDKIT" -D memory.dummy=1 -U - memory 1M \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size" 2>"$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "-D memory.dummy=1 was refused"; }
cat "$tmpdir/err"
grep -qx 1048576 "$tmpdir/size" || fail "-D broke the server"
