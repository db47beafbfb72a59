#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The memory plugin's resident size follows the bytes written: a 1 TiB
# export costs almost nothing until written; 64 MiB written grows RSS by
# 64 MiB (within 2% and a few MiB), and overwriting it in 1 MiB writes
# a few MiB more at most; trimming it all gives the memory back;
# writing again reuses it; scattered 4 KiB writes cost little more than
# their bytes.  Fresh and reused pages read back exactly as written
# (no stale bytes in a page only partly written after a trim).
#
# It measures the plugin, so the server runs one worker (-t 1) and the
# client writes 256 KiB at a time: each worker keeps a buffer as large
# as the largest request it has served, in its own malloc arena, and
# under load the pool would grow to 16 of them.  In a sanitizer build
# the resident size also holds ASan's shadow memory and its quarantine
# of freed blocks, so there the sizes are printed, not checked.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

start_server -t 1 memory 1T
check_rss=true
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  echo "sanitizer build ($NBDKIT_SANITIZERS): RSS bounds not checked"
  check_rss=false
fi
rss () { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$server_pid/status"; }
mib () { echo $(( $1 / 1048576 )); }
base=$(rss)
echo "idle 1 TiB export: RSS $(mib "$base") MiB"
! $check_rss || [ "$base" -lt $(( 64 * 1048576 )) ] || fail "an empty 1 TiB export costs $(mib "$base") MiB"

write_64m='
buf = bytes(range(256)) * 1024             # 256 KiB
for i in range(256):
    h.pwrite(buf, (1 << 30) + i * 262144)
'
t nbdsh -u "$uri" -c "$write_64m"
after=$(rss)
grew=$(( after - base ))
echo "64 MiB written: RSS grew $(mib "$grew") MiB"
! $check_rss || [ "$grew" -ge $(( 64 * 1048576 )) ] || fail "RSS grew less than the data ($grew)"
! $check_rss || [ "$grew" -le $(( 64 * 1048576 * 102 / 100 + 8 * 1048576 )) ] ||
  fail "RSS grew $(mib "$grew") MiB for 64 MiB of data"

# Overwriting it all four times in 1 MiB writes: each payload lands in
# pages of its own that then replace the stored ones, and the replaced
# pages are recycled, so RSS stays within a few MiB of the data.
t nbdsh -u "$uri" -c '
for r in range(4):
    buf = bytes([r + 1]) * 1048576
    for i in range(64):
        h.pwrite(buf, (1 << 30) + i * 1048576)
for i in range(64):
    assert h.pread(1048576, (1 << 30) + i * 1048576) == bytes([4]) * 1048576
'
over=$(( $(rss) - after ))
echo "64 MiB overwritten 4 times in 1 MiB writes: RSS grew $(mib "$over") MiB more"
! $check_rss || [ "$over" -le $(( 8 * 1048576 )) ] ||
  fail "overwrites cost $(mib "$over") MiB more than the data"

t nbdsh -u "$uri" -c 'h.trim(64 * 1048576, 1 << 30)'
trimmed=$(rss)
echo "after trimming it all: RSS $(mib "$trimmed") MiB"
! $check_rss || [ "$trimmed" -le $(( base + 8 * 1048576 )) ] ||
  fail "trim did not give the memory back: $(mib "$trimmed") MiB"

# Reused pages: partial writes must read back with zeroes around them.
t nbdsh -u "$uri" -c '
for i in range(64):
    h.pwrite(b"x" * 100, (1 << 30) + i * 1048576 + 1000)
for i in range(64):
    got = h.pread(4096, (1 << 30) + i * 1048576)
    want = bytes(1000) + b"x" * 100 + bytes(4096 - 1100)
    assert got == want, (i, got[:16])
assert h.pread(1048576 - 8192, (1 << 30) + 4096) == bytes(1048576 - 8192)
'

# 5000 scattered 4 KiB writes over the whole terabyte.
before=$(rss)
t nbdsh -u "$uri" -c '
import random
r = random.Random(7)
page = b"\xa5" * 4096
for i in range(5000):
    h.pwrite(page, r.randrange(1 << 28) * 4096)
'
grew=$(( $(rss) - before ))
echo "5000 scattered 4 KiB writes (19.5 MiB): RSS grew $(mib "$grew") MiB"
! $check_rss || [ "$grew" -le $(( 5000 * 4096 * 102 / 100 + 8 * 1048576 )) ] ||
  fail "scattered writes cost $(mib "$grew") MiB"
