#!/usr/bin/env bash
# --version (and -V) print "nbdkit X.Y.Z" and exit 0.
source "$(dirname "$0")/functions.sh"

for opt in --version -V; do
  t "$NBDKIT" $opt > "$tmpdir/v"
  cat "$tmpdir/v"
  head -1 "$tmpdir/v" | grep -Eq '^nbdkit [0-9]+\.[0-9]+\.[0-9]+' ||
    fail "$opt: first line is not 'nbdkit X.Y.Z'"
done
