#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# memory allocator=zstd compresses: 64 MiB of text written through it
# grows the server's RSS by far less than 64 MiB (allocator=sparse,
# for comparison, by at least that), it reads back intact, and the
# debug line at exit reports the compression ratio.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
"$NBDKIT" memory --dump-plugin | grep -qx 'zstd=yes' ||
  fail "--dump-plugin does not say zstd=yes (libzstd-dev is in .ci/deps)"

rss () { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$server_pid/status"; }
write_64m='
import hashlib
line = b"".join(b"line %d of some compressible text\n" % i for i in range(40000))
buf = (line * 2)[:1 << 20]
for i in range(64):
    h.pwrite(buf, i << 20)
for i in range(0, 64, 7):
    assert h.pread(1 << 20, i << 20) == buf
'
declare -A grew
for a in sparse zstd; do
  start_server -t 1 -v memory 1G allocator=$a
  base=$(rss)
  t nbdsh -u "$uri" -c "$write_64m"
  grew[$a]=$(( $(rss) - base ))
  echo "allocator=$a: RSS grew $(( ${grew[$a]} / 1048576 )) MiB for 64 MiB"
  stop_server
done
if [ -z "${NBDKIT_SANITIZERS:-}" ]; then
  [ "${grew[sparse]}" -ge $(( 60 * 1048576 )) ] ||
    fail "sparse grew less than the data: the comparison means nothing"
  [ "${grew[zstd]}" -le $(( 16 * 1048576 )) ] ||
    fail "zstd: RSS grew ${grew[zstd]} bytes for 64 MiB of text"
fi

# The debug line at exit: pages, bytes and ratio.
t "$NBDKIT" -v -U - memory 1G allocator=zstd --run "nbdsh -u \"\$uri\" -c '$write_64m'" \
  2> "$tmpdir/log"
grep 'allocator zstd:' "$tmpdir/log" ||
  fail "no compression statistics in the debug output"
ratio=$(sed -n 's/.*allocator zstd: 2048 pages (67108864 bytes) stored in [0-9]* compressed bytes, ratio \([0-9]*\)\..*/\1/p' "$tmpdir/log")
[ -n "$ratio" ] && [ "$ratio" -ge 4 ] || fail "zstd: ratio ${ratio:-missing}, expected at least 4:1"
