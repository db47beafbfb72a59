#!/bin/sh -
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Turn probes.d (on stdin) into a probes.h whose macros do nothing, for
# builds without USDT.  Keeps probes.d the only list of probes.  The
# macros still name their arguments (inside if (0), never evaluated), so
# a variable computed only for a probe does not warn.
echo '/* Generated from probes.d by probes-disabled.sh: probes are off. */'
echo 'static inline void nbdkit_probe_off_ (int unused, ...)'
echo '  __attribute__ ((unused));'
echo 'static inline void nbdkit_probe_off_ (int unused, ...) { (void) unused; }'
sed -n 's/^[[:space:]]*probe[[:space:]]*\([a-z_0-9]*\)[[:space:]]*(.*/\1/p' |
while read -r name; do
  up=$(echo "$name" | tr 'a-z' 'A-Z')
  printf '#define NBDKIT_%s(...) \\\n' "$up"
  printf '  do { if (0) nbdkit_probe_off_ (0, ##__VA_ARGS__); } while (0)\n'
  printf '#define NBDKIT_%s_ENABLED() (0)\n' "$up"
done
