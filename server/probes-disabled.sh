#!/bin/sh -
# Turn probes.d (on stdin) into a probes.h whose macros do nothing, for
# builds without USDT.  Keeps probes.d the only list of probes.
echo '/* Generated from probes.d by probes-disabled.sh: probes are off. */'
sed -n 's/^[[:space:]]*probe[[:space:]]*\([a-z_0-9]*\)[[:space:]]*(.*/\1/p' |
while read -r name; do
  up=$(echo "$name" | tr 'a-z' 'A-Z')
  printf '#define NBDKIT_%s(...) do { } while (0)\n' "$up"
  printf '#define NBDKIT_%s_ENABLED() (0)\n' "$up"
done
