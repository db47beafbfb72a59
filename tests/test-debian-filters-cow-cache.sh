#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filter ABI: Debian's prebuilt filters that keep their own copy of
# the data or read ahead (cow, cache, cacheextents, readahead, scan),
# loaded by path into OUR server over our file plugin, give the same
# flags, map, bytes, write outcomes and file contents as Debian's nbdkit
# running the same command (tests/debian-filters.sh).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024))
orig_sha="$(sha256sum < "$disk.orig")"
state_files=("$disk")

# cow: writes stay in the overlay, the file is untouched.
compare cow-read read --filter=cow file "$disk"
compare cow-write write --filter=cow file "$disk"
expect_in cow-file-untouched "$ours" "^state disk.img $orig_sha\$"
compare cow-block-size write --filter=cow file "$disk" cow-block-size=4096
compare cow-on-read write --filter=cow file "$disk" cow-on-read=true \
  cow-on-cache=true

# cache: what reaches the file after flush, in each mode.
for mode in writeback writethrough unsafe; do
  compare cache-$mode write --filter=cache file "$disk" cache=$mode
done
compare cache-read read --filter=cache file "$disk" cache-on-read=true \
  cache-min-block-size=4096

compare cacheextents read --filter=cacheextents file "$disk"
compare cacheextents-write write --filter=cacheextents file "$disk"

# readahead and scan ask the plugin to cache (next->cache with no error
# pointer), the file plugin's cache being a read.
compare readahead read --filter=readahead file "$disk"
compare readahead-write write --filter=readahead file "$disk"
compare scan read --filter=scan file "$disk"
compare scan-size read --filter=scan file "$disk" scan-size=1M \
  scan-ahead=false
# Stacked as their pages suggest.
compare readahead-cache read --filter=readahead --filter=cache file "$disk"
compare scan-cow read --filter=scan --filter=cow file "$disk" cow-on-cache=true

finish
