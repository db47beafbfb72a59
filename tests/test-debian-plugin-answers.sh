#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What each plugin advertises (size, read-only, flush, trim, zero, fast
# zero, FUA, multi-conn, cache, DF, rotational, block sizes), as
# nbdinfo --json reports it, is the same under Debian's nbdkit and
# ours for the same command.  These plugins' answers come from
# common/pluginkit's shared callbacks: a wrong table entry changes a
# capability a client sees.  Deliberate differences, each said in the
# plugin's page, are compared apart:
#  - file: ours answers fast zero (a fast zero that cannot be done
#    cheaply fails at once with ENOTSUP); nbdkit 1.32's does not;
#  - floppy: without size= ours makes a FAT32 with at least 65525
#    clusters (about 33 MiB), which every FAT driver takes for FAT32;
#    nbdkit makes one just big enough.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo /usr/bin/nbdkit
requires /usr/bin/python3 -c 'import json'

cd "$tmpdir"
mkdir dir od
echo hello > dir/a.txt
head -c 1M /dev/urandom > f.img

answers ()
{
  local server="$1"; shift
  "$server" -U - "$@" --run 'nbdinfo --json "$uri"' 2> answers.err |
    /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
keys = ["export-size", "is_read_only", "can_flush", "can_trim", "can_zero",
        "can_fast_zero", "can_fua", "can_multi_conn", "can_cache", "can_df",
        "is_rotational", "block_size_minimum", "block_size_preferred",
        "block_size_maximum"]
skip = sys.argv[1:]
print(" ".join("%s=%s" % (k, e.get(k)) for k in keys if k not in skip))
' "${skip[@]}" || { cat answers.err; fail "$server $*: no answers"; }
}

compared=0
same ()
{
  local a b
  a=$(answers /usr/bin/nbdkit "$@")
  b=$(answers "$NBDKIT" "$@")
  [ "$a" = "$b" ] ||
    fail "nbdkit $*: Debian's: $a; ours: $b"
  echo "same: $*"
  compared=$((compared + 1))
}

skip=()
same null size=1M
same zero
same full size=1M
same pattern size=1M
same random size=1M seed=1
same sparse-random size=1M seed=1
same memory size=1M
same data '1 2 3' size=1M
same partitioning f.img
same split f.img
same ondemand dir=od size=1M
if command -v xorriso >/dev/null || command -v genisoimage >/dev/null ||
   command -v mkisofs >/dev/null; then
  same iso dir
fi
if command -v mke2fs >/dev/null; then
  same linuxdisk dir
fi
skip=(can_fast_zero)
same file f.img
skip=(export-size)
same floppy dir
[ "$compared" -ge 13 ] || fail "only $compared plugins compared"
