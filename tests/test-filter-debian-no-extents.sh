#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A filter whose can_extents says no is never asked for block status,
# and neither is anything below it: the server answers "all data" for
# it (nbdkit does the same).  Debian's gzip, xz, luks and noextents
# filters have can_extents returning 0 and no extents callback; if the
# plugin's map leaked through, nbdcopy would skip the "holes" of the
# compressed or encrypted file and write zeroes where there is data.
# Each copy must give the source's bytes, and the map must be the one
# Debian's own nbdkit gives for the same command.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdinfo sha256sum gzip xz qemu-img
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-gzip-filter.so"

# A disk with data, holes and data again: the compressed files are
# much smaller than it, so their own map says "hole" past their end.
disk="$tmpdir/disk.raw"
truncate -s 8M "$disk"
head -c 300000 /dev/urandom |
  dd of="$disk" bs=1 seek=5000 conv=notrunc status=none
head -c 100000 /dev/urandom |
  dd of="$disk" bs=1 seek=$((6 * 1024 * 1024)) conv=notrunc status=none
want="$(sha256sum < "$disk" | cut -d' ' -f1)"
gzip -c "$disk" > "$tmpdir/disk.gz"
xz -c "$disk" > "$tmpdir/disk.xz"
# qemu-img times its key derivation on the CPU clock and now and then
# gives up on a loaded machine ("Unable to get accurate CPU usage"):
# a few tries.
for try in $(seq 30); do
  t qemu-img convert -q -f raw -O luks --object secret,id=s,data=pw \
    -o key-secret=s,iter-time=100 "$disk" "$tmpdir/disk.luks" && break
  [ "$try" -lt 30 ] || fail "qemu-img could not make a LUKS image"
  sleep 0.2
done

# check NAME FILE [PARAMS]: copy through Debian's NAME filter over the
# file plugin, compare bytes and map.
check ()
{
  local name=$1 file=$2
  shift 2
  local args=(-r -U - --filter="$fdir/nbdkit-$name-filter.so" file "$file"
              "$@")
  rm -f "$tmpdir/out.raw"
  t "$NBDKIT" "${args[@]}" --run "nbdcopy \"\$uri\" $tmpdir/out.raw" ||
    fail "$name: nbdcopy failed"
  local got
  got="$(sha256sum < "$tmpdir/out.raw" | cut -d' ' -f1)"
  [ "$got" = "$want" ] ||
    fail "$name: nbdcopy through the filter did not give the source bytes"
  t "$NBDKIT" "${args[@]}" --run 'nbdinfo --map "$uri"' > "$tmpdir/ours"
  t /usr/bin/nbdkit "${args[@]}" --run 'nbdinfo --map "$uri"' \
    > "$tmpdir/debian"
  diff -u "$tmpdir/debian" "$tmpdir/ours" ||
    fail "$name: the map differs from Debian's nbdkit"
}

check noextents "$disk"
check gzip "$tmpdir/disk.gz"
check xz "$tmpdir/disk.xz"
check luks "$tmpdir/disk.luks" passphrase=pw
