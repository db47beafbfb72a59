#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=nozero, every zeromode with every fastzeromode: what the
# client is offered (can_zero, can_fast_zero), what each kind of zero
# request gets (plain, FUA, NO_HOLE, FAST_ZERO, and an 8 MiB one), and
# what reaches the plugin, logged by Debian's log filter placed under
# ours (writes or zeroes, with their trim/fua/fast flags), must be the
# same as Debian's nbdkit running its own nozero filter over the same
# log filter.  Also the bytes read back, and the errors for bad modes.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log="$tmpdir/plugin.log"
logfilter="--filter=$debian_filterdir/nbdkit-log-filter.so"

cat > "$tmpdir/zeroes" <<EOF
#!/bin/bash
set -e
uri="\$1"
nbdsh -u "\$uri" -c '
import hashlib
print("can_zero", h.can_zero(), "can_fast_zero", h.can_fast_zero())
h.pwrite(b"x" * 4194304, 0)
for name, fl in (("plain", 0), ("fua", nbd.CMD_FLAG_FUA),
                 ("no-hole", nbd.CMD_FLAG_NO_HOLE),
                 ("fast", nbd.CMD_FLAG_FAST_ZERO),
                 ("fast-fua", nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_FUA)):
    try:
        h.zero(65536, 65536 * len(name), fl)
        print(name, "ok")
    except nbd.Error as e:
        print(name, "error", e.errno)
if h.can_zero():
    h.zero(8 * 1024 * 1024, 4194304)
print("sha256", hashlib.sha256(h.pread(8 * 1024 * 1024, 0)).hexdigest())
'
# What reached the plugin: calls and their flags, without timestamps.
grep -E ' (Write|Zero|Trim|Flush) id=' "$log" | cut -d' ' -f4-
EOF
chmod +x "$tmpdir/zeroes"

for zm in none emulate notrim plugin; do
  for fzm in default slow ignore none; do
    compare_own "nozero-$zm-$fzm" "$tmpdir/zeroes" --filter=nozero \
      "$logfilter" memory 16M logfile="$log" zeromode=$zm fastzeromode=$fzm
    cp "$ours" "$tmpdir/$zm-$fzm"
  done
done
# Some of what the comparison holds, spelled out (a check of the test).
expect_in nozero-notrim-trim "$tmpdir/notrim-ignore" \
  '^Zero id=[0-9]+ offset=0x50000 count=0x10000 trim=0 fua=0 fast=0'
expect_in nozero-ignore-fast "$tmpdir/notrim-ignore" '^fast ok$'
expect_in nozero-emulate-writes "$tmpdir/emulate-default" \
  '^Write id=[0-9]+ offset=0x400000 count=0x800000 fua=0'
expect_in nozero-emulate-fast "$tmpdir/emulate-default" \
  '^fast error ENOTSUP$'
compare_own nozero-default "$tmpdir/zeroes" --filter=nozero memory 16M \
  logfile="$log" "$logfilter"
expect_in nozero-default-none "$ours" '^can_zero False can_fast_zero False$'

# Copies through the filter give the same bytes and map.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((2 * 1024 * 1024))
cp "$disk" "$disk.orig"
compare_own nozero-read read --filter=nozero file "$disk" zeromode=emulate
state_files=("$disk")
for zm in none emulate notrim; do
  compare_own "nozero-write-$zm" write --filter=nozero file "$disk" \
    zeromode=$zm
done
state_files=()

# --- Bad parameters: exit 1, one line naming the key ----------------------
bad ()
{
  refuses "$1" --filter=nozero null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad "^nbdkit: nozero: error: zeromode: unknown mode 'trim'" zeromode=trim
bad "^nbdkit: nozero: error: fastzeromode: unknown mode 'fast'" \
  fastzeromode=fast
bad "^nbdkit: nozero: error: zeromode: unknown mode ''" zeromode=
bad "^nbdkit: null: error: unknown parameter 'zero'" zero=none

finish
