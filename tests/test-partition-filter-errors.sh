#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What the partition filter says when the partition asked for is not
# one to serve, with the meaning nbdkit 1.32's message has: the
# extended partition of an MBR disk is "not found" (not a partition to
# serve), and partition 5 or up on a disk whose table has no extended
# partition is a logical partition asked for where there can be none,
# not a partition that exists.  Debian's nbdkit runs the same commands.
source "$(dirname "$0")/functions.sh"
requires_cmd sfdisk nbdinfo

ext="$tmpdir/ext.img"
truncate -s 20M "$ext"
sfdisk -q "$ext" <<EOF2
label: dos
$ext""1: start=2048, size=8192, type=83
$ext""2: start=10240, size=20480, type=5
$ext""5: start=12288, size=4096, type=83
EOF2
noext="$tmpdir/noext.img"
truncate -s 20M "$noext"
printf 'label: dos\n,4M,83\n,4M,83\n' | sfdisk -q "$noext"

servers=("$NBDKIT")
[ -x /usr/bin/nbdkit ] && servers+=(/usr/bin/nbdkit)

# error_of SERVER DISK N: what SERVER says when a client opens
# partition N of DISK (which must fail).
error_of ()
{
  "$1" -U - --filter=partition file "$2" partition="$3" \
    --run 'nbdinfo --size "$uri"' > "$tmpdir/out" 2> "$tmpdir/err" &&
    fail "$1: partition $3 of ${2##*/} was served"
  grep 'error:' "$tmpdir/err" | grep -v nbdinfo || :
}

for server in "${servers[@]}"; do
  # The logical partition itself is served, by both.
  [ "$(t "$server" -U - --filter=partition file "$ext" partition=5 \
         --run 'nbdinfo --size "$uri"')" = 2097152 ] ||
    fail "$server: logical partition 5 not served"

  msg="$(error_of "$server" "$ext" 2)"
  echo "$server, extended partition: $msg"
  echo "$msg" | grep -q 'MBR partition 2 not found' ||
    fail "$server: the extended partition is not 'not found'"

  msg="$(error_of "$server" "$noext" 5)"
  echo "$server, no extended partition: $msg"
  echo "$msg" | grep -Eq 'logical partition.* no extended partition' ||
    fail "$server: no word of the missing extended partition"
done

# Ours never says that the missing partition exists.
msg="$(error_of "$NBDKIT" "$noext" 5)"
echo "$msg" | grep -q 'MBR partition 5 not found' ||
  fail "partition 5 without an extended partition: not 'not found'"
if echo "$msg" | grep -q 'is a logical partition'; then
  fail "partition 5 without an extended partition is said to exist"
fi
