#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --help prints usage on stdout, mentioning the main options, exit 0.
source "$(dirname "$0")/functions.sh"

t "$NBDKIT" --help > "$tmpdir/help"
cat "$tmpdir/help"
for word in --filter --run -U --dump-config --version PLUGIN; do
  grep -Fq -- "$word" "$tmpdir/help" || fail "--help does not mention $word"
done
