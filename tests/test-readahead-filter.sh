#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=readahead: after each read the layer below gets a prefetch
# (NBD_CMD_CACHE) of the window that follows, the window growing on
# reads that jump forward and shrinking on reads that go back, exactly
# as nbdkit 1.32's filter sends them (seen through Debian's log filter
# below it); data read through it is unchanged, also by nbdcopy over
# several connections; and it warns (and does nothing) without a
# native prefetch or a parallel thread model.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log_so="$debian_filterdir/nbdkit-log-filter.so"
disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((8 * 1024 * 1024))
cp "$disk.orig" "$disk"

# The reads: sequential 4 KiB reads, a jump, sequential 64 KiB reads
# (the window doubles on each jump past the last prefetch), then going
# back (the window falls back to 32 KiB), and a read near the end (the
# prefetch stops at the end of the disk, and none follows the last block).
cat > "$tmpdir/reads" <<'SH'
#!/bin/sh
uri="$1"
log="$(dirname "$0")/cache.log"
nbdsh -u "$uri" -c '
import time
for i in range(20):
    h.pread(4096, i * 4096)
h.pread(4096, 5000000)
for i in range(5):
    h.pread(65536, 6000000 + i * 65536)
h.pread(512, 100)
h.pread(512, 612)
h.pread(4096, 8 * 1024 * 1024 - 8192)
h.pread(4096, 8 * 1024 * 1024 - 4096)
time.sleep(0.5)
'
# The prefetches the layer below saw, in the order they were sent.
sed -n 's/.* Cache id=[0-9]* \(offset=[^ ]* count=[^ ]*\).*/\1/p' "$log"
SH
chmod +x "$tmpdir/reads"
compare_own readahead-cache-sequence "$tmpdir/reads" --filter=readahead \
  --filter="$log_so" file "$disk" logfile="$tmpdir/cache.log"
# The first three and the window changes, checked by hand too.
expect_in readahead-cache-sequence "$ours" '^offset=0x1000 count=0x8000$'
expect_in readahead-cache-sequence "$ours" '^offset=0x5c8d80 count=0x10000$'
expect_in readahead-cache-sequence "$ours" '^offset=0x5d8d80 count=0x20000$'
expect_in readahead-cache-sequence "$ours" '^offset=0x264 count=0x20000$'
expect_in readahead-cache-sequence "$ours" '^offset=0x464 count=0x8000$'
expect_in readahead-cache-sequence "$ours" '^offset=0x7ff000 count=0x1000$'
n="$(grep -c '^offset=' "$ours" || :)"
[ "$n" -eq 29 ] ||
  note_failure readahead-cache-count "expected 29 prefetches, saw $n"

# Bytes and map through the filter, alone and over a cache.
compare_own readahead-read read --filter=readahead file "$disk"
compare_own readahead-cache-read read --filter=readahead \
  --filter="$debian_filterdir/nbdkit-cache-filter.so" file "$disk"
state_files=("$disk")
compare_own readahead-write write --filter=readahead file "$disk"

# nbdcopy with several connections and many requests in flight.
t "$NBDKIT" -U - --filter=readahead memory 64M --run '
  nbdcopy '"$disk.orig"' "$uri" &&
  nbdcopy --connections=4 --requests=16 "$uri" '"$tmpdir/copy"' &&
  nbdcopy --connections=4 --request-size=4096 "$uri" '"$tmpdir/copy4k"'
' || fail "nbdcopy through readahead failed"
cmp -n $((8 * 1024 * 1024)) "$disk.orig" "$tmpdir/copy" ||
  fail "nbdcopy read back different data"
cmp -n $((8 * 1024 * 1024)) "$disk.orig" "$tmpdir/copy4k" ||
  fail "nbdcopy (4k requests) read back different data"

# When the filter can do nothing it says so on each connection, once
# for the thread model, twice for a missing native prefetch.
warn="readahead: warning: underlying plugin does not support NBD_CMD_CACHE or PARALLEL thread model"
try="readahead: try adding --filter=cache after this filter"
t "$NBDKIT" -U - --filter=readahead \
  --filter="$debian_filterdir/nbdkit-noparallel-filter.so" memory 1M \
  --run 'nbdsh -u "$uri" -c "h.pread(512, 0)"' 2> "$tmpdir/err1" ||
  fail "readahead over noparallel failed"
[ "$(grep -c "$warn" "$tmpdir/err1")" -eq 1 ] &&
  ! grep -q "$try" "$tmpdir/err1" ||
  { cat "$tmpdir/err1"; fail "no (single) thread model warning"; }
rm -f "$tmpdir/nc.log"
t "$NBDKIT" -U - --filter=readahead --filter="$log_so" \
  --filter="$debian_filterdir/nbdkit-nocache-filter.so" memory 1M \
  cachemode=emulate logfile="$tmpdir/nc.log" \
  --run 'nbdsh -u "$uri" -c "h.pread(512, 0); h.pread(512, 512)"' \
  2> "$tmpdir/err2" || fail "readahead over nocache failed"
grep -q "$warn" "$tmpdir/err2" && grep -q "$try" "$tmpdir/err2" ||
  { cat "$tmpdir/err2"; fail "no missing-cache warning"; }
! grep -q " Cache " "$tmpdir/nc.log" ||
  fail "prefetches were sent to a layer that only emulates them"

# No parameters of its own: unknown ones reach the plugin.
refuses "unknown parameter 'readahead'" \
  --filter=readahead null 1M readahead=1 || fail "readahead=1 not refused"
finish
