#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=nofilter changes nothing: size, flags, map, bytes and writes
# are those of the plugin alone, and the same as Debian's nbdkit with
# its own nofilter filter; parameters go to the plugin.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk" $((2 * 1024 * 1024 + 4096))
cp "$disk" "$disk.orig"

compare_own nofilter-read read --filter=nofilter file "$disk"
# The same as no filter at all, under our server.
_run_one "$NBDKIT" "$tmpdir/plain" read file "$disk"
cmp -s "$ours" "$tmpdir/plain" ||
  note_failure nofilter-plain "differs from the plugin alone:" \
    "$(diff "$tmpdir/plain" "$ours")"
state_files=("$disk")
compare_own nofilter-write write --filter=nofilter file "$disk"
compare_own nofilter-write-stacked write --filter=nofilter \
  --filter=nofilter --filter=nofilter file "$disk"
state_files=()

t "$NBDKIT" -U - --filter=nofilter null 1M bogus=1 --run true \
  2> "$tmpdir/err" && fail "bogus=1 accepted"
grep -q "^nbdkit: null: error: unknown parameter 'bogus'" "$tmpdir/err" ||
  fail "wrong error: $(cat "$tmpdir/err")"

finish
