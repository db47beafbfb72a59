#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=noextents: a sparse file maps as all data, the plugin is
# never asked for block status (Debian's log filter under ours sees no
# Extents call), and bytes, map and copies are the same as Debian's
# nbdkit with its own noextents filter.  Parameters go to the plugin.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk" $((2 * 1024 * 1024 + 512))
cp "$disk" "$disk.orig"

# Without the filter the file has holes, so the map below means something.
t "$NBDKIT" -U - file "$disk" --run 'nbdinfo --map "$uri"' > "$tmpdir/map"
grep -q hole "$tmpdir/map" || fail "the test file has no holes: $(cat "$tmpdir/map")"

compare_own noextents-read read --filter=noextents file "$disk"
expect_in noextents-all-data "$ours" '^ +0 +2097664 +0 +data$'
state_files=("$disk")
compare_own noextents-write write --filter=noextents file "$disk"
state_files=()

# The plugin is not asked.
log="$tmpdir/plugin.log"
cat > "$tmpdir/asked" <<EOF
#!/bin/sh
nbdinfo --map "\$1"
grep -c ' Extents id=' "$log" || :
EOF
chmod +x "$tmpdir/asked"
compare_own noextents-asked "$tmpdir/asked" --filter=noextents \
  "--filter=$debian_filterdir/nbdkit-log-filter.so" file "$disk" \
  logfile="$log"
expect_in noextents-not-asked "$ours" '^0$'

# No parameters of its own: an unknown one is the plugin's to refuse.
t "$NBDKIT" -U - --filter=noextents null 1M bogus=1 --run true \
  2> "$tmpdir/err" && fail "bogus=1 accepted"
grep -q "^nbdkit: null: error: unknown parameter 'bogus'" "$tmpdir/err" ||
  fail "wrong error: $(cat "$tmpdir/err")"

finish
