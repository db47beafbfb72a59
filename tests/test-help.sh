#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --help prints usage on stdout, mentioning the main options and this
# server's own name, exit 0.
source "$(dirname "$0")/functions.sh"

t "$NBDKIT" --help > "$tmpdir/help"
cat "$tmpdir/help"
for word in --filter --run -U --dump-config --version PLUGIN; do
  grep -Fq -- "$word" "$tmpdir/help" || fail "--help does not mention $word"
done
# This server's own name and release are in --help (--version prints
# only what nbdkit prints).
grep -Fq "nbdkit-usdt 0.2.0" "$tmpdir/help" ||
  fail "--help does not name this server (nbdkit-usdt 0.2.0)"
