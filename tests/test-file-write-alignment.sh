#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A write's payload reaches the file plugin's pwrite from a buffer that
# starts on a page.  Where the buffer happened to sit once decided how
# fast the kernel copied it into the page cache: 16 bytes short of a
# page, 1 MiB writes over TCP took three times the server CPU
# (bench/HISTORY.md, "The worker's buffer starts on a page").  strace
# shows pwrite64's raw arguments; every payload of a page or more, on a
# first connection and on later ones (whose buffers come from a heap
# the earlier ones left behind), must start on a page, and the bytes
# must read back.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh strace

disk="$tmpdir/disk.img"
truncate -s 64M "$disk"
out="$tmpdir/strace"
# LeakSanitizer cannot run under ptrace.
env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  strace -f -qq -e trace=pwrite64 -e raw=pwrite64 -o "$out" \
  "$NBDKIT" -U - file "$disk" --run '
  for seed in 1 2 3; do
    nbdsh -u "$uri" -c "
import random
rng = random.Random($seed)
for n in (4096, 65536 + 512, 1024 * 1024, 3 * 1024 * 1024 + 4096):
    off = rng.randrange(0, 60 * 1024 * 1024) // 512 * 512
    data = rng.randbytes(n)
    h.pwrite(data, off)
    assert h.pread(n, off) == data, (n, off)
" || exit 1
  done' || fail "the writes failed or read back wrong"

# pwrite64(fd, buf, count, offset) = result, all in hex.
/usr/bin/python3 - "$out" <<'PY' || fail "payloads reached pwrite from buffers not on a page"
import re, sys
n = bad = 0
for line in open(sys.argv[1]):
    m = re.search(r"pwrite64\((0x[0-9a-f]+), (0x[0-9a-f]+), (0x[0-9a-f]+)", line)
    if not m or int(m.group(3), 16) < 4096:
        continue
    n += 1
    if int(m.group(2), 16) % 4096:
        bad += 1
        print("unaligned:", line.strip())
print("%d payloads of a page or more, %d unaligned" % (n, bad))
sys.exit(n < 12 or bad > 0)
PY
