#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit lets a filter pass NULL for err to a data call on its next
# layer; Debian's readahead and scan filters call next->cache (...,
# NULL) from their own threads.  The server must take that (it used to
# write *err and crash): nbdcopy through each of them gives the bytes
# of the source, with caching native (file) and emulated (memory).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy sha256sum
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-readahead-filter.so"

disk="$tmpdir/disk.raw"
head -c $((6 * 1024 * 1024)) /dev/urandom > "$disk"
want="$(sha256sum < "$disk" | cut -d' ' -f1)"

for name in readahead scan; do
  rm -f "$tmpdir/out.raw"
  t "$NBDKIT" -r -U - --filter="$fdir/nbdkit-$name-filter.so" file "$disk" \
    --run "nbdcopy \"\$uri\" $tmpdir/out.raw" ||
    fail "$name over file: nbdcopy failed"
  got="$(sha256sum < "$tmpdir/out.raw" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || fail "$name over file: wrong bytes"

  # memory caches by emulation (a read); write the source in first.
  t "$NBDKIT" -U - --filter="$fdir/nbdkit-$name-filter.so" memory 6M \
    --run "nbdcopy $disk \"\$uri\" && nbdcopy \"\$uri\" $tmpdir/out2.raw" ||
    fail "$name over memory: nbdcopy failed"
  got="$(sha256sum < "$tmpdir/out2.raw" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || fail "$name over memory: wrong bytes"
  rm -f "$tmpdir/out2.raw"
done
