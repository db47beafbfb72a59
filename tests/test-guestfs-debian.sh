#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Our guestfs plugin and Debian's (nbdkit 1.32) on the same command
# line, read-only, side by side (one appliance each, booting at the
# same time): nbdcopy gets the same bytes from both, and they are the
# partition's bytes cut out of the image; -r leaves the image as it was.
source "$(dirname "$0")/functions.sh"
requires test -f "$debian_plugindir/nbdkit-guestfs-plugin.so"
source "$srcdir/guestfs-image.sh"
cp "$tmpdir/disk.img" "$tmpdir/disk.orig"

args=(-r -U - guestfs format=raw disk="$tmpdir/disk.img" export=/dev/sda1)
t /usr/bin/nbdkit "${args[@]}" --run "nbdcopy \"\$uri\" $tmpdir/debian.img" \
  > "$tmpdir/debian.log" 2>&1 &
debian=$!
t "$NBDKIT" $hs "${args[@]}" --run "nbdcopy \"\$uri\" $tmpdir/ours.img" ||
  fail "our guestfs plugin failed"
wait $debian || { cat "$tmpdir/debian.log"; fail "Debian's guestfs plugin failed"; }

cmp "$tmpdir/part.img" "$tmpdir/ours.img" ||
  fail "our bytes differ from the partition's"
cmp "$tmpdir/ours.img" "$tmpdir/debian.img" ||
  fail "our bytes differ from Debian's"
cmp "$tmpdir/disk.orig" "$tmpdir/disk.img" || fail "-r changed the image"
