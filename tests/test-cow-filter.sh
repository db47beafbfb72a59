#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=cow: the same command gives the same bytes, map and flags as
# Debian's nbdkit with its cow filter (over a file and over memory, at
# several block sizes, with cow-on-read and cow-on-cache), the plugin's
# file is never changed (sha256 before and after), and bad parameter
# values are refused with one line naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024 + 12345))
# A few small data runs that do not sit on 64K boundaries, so that a
# map aligned to the wrong block size shows.
/usr/bin/python3 - "$disk.orig" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    for off in (70000, 300000, 1000000, 4 * 1024 * 1024 + 10000):
        f.seek(off)
        f.write(b"small run %d " % off * 50)
PY
before="$(sha256sum < "$disk.orig")"
state_files=("$disk")

compare_own "cow read file" read --filter=cow file "$disk"
compare_own "cow write file" write --filter=cow file "$disk"
compare_own "cow write 4K blocks" write --filter=cow file "$disk" \
  cow-block-size=4096
compare_own "cow write 1M blocks" write --filter=cow file "$disk" \
  cow-block-size=1M
compare_own "cow write on-read" write --filter=cow file "$disk" \
  cow-on-read=true cow-on-cache=true
compare_own "cow write memory" write --filter=cow memory 3M
compare_own "cow read memory" read --filter=cow memory 3M

# A script of our own: writes of every shape, then read-back of both
# overlay and plugin blocks, and the map.
cat > "$tmpdir/shapes" <<EOS
#!/bin/sh
set -e
nbdsh -u "\$1" -c '
import hashlib
size = h.get_size()
h.pwrite(b"A" * 5, 65530)                       # across a block edge
h.pwrite(b"B" * 200000, 400000)                 # partial, whole, partial
h.pwrite(b"C" * 65536, 1 << 20)                 # one aligned block
h.trim(131072, 2 << 20)                         # aligned trim
h.trim(1000, 3 << 20 | 500)                     # partial trim: zeroes
h.pwrite(b"D" * 100, size - 100)                # the last, short block
h.cache(65536 * 3, 0)
print(hashlib.sha256(h.pread(size, 0)).hexdigest())
print(h.pread(16, 65528), h.pread(8, (3 << 20) + 496))
'
nbdinfo --map "\$1"
EOS
chmod +x "$tmpdir/shapes"
compare_own "cow shapes" "$tmpdir/shapes" --filter=cow file "$disk"
compare_own "cow shapes on-read" "$tmpdir/shapes" --filter=cow file "$disk" \
  cow-on-read=true
compare_own "cow shapes 4K" "$tmpdir/shapes" --filter=cow file "$disk" \
  cow-block-size=4K cow-on-cache=true

# Nothing written through the filter reached the plugin's file.
cp "$disk.orig" "$disk"
head -c "$(stat -c %s "$disk")" /dev/urandom > "$tmpdir/random.img"
t "$NBDKIT" -U - --filter=cow file "$disk" --run '
  nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 100000, 12345); h.trim(65536, 0); h.flush()"
  nbdcopy '"$tmpdir/random.img"' "$uri"
  nbdcopy "$uri" - | cmp - '"$tmpdir/random.img"'' ||
  note_failure "cow writes" "writing through the filter failed"
[ "$(sha256sum < "$disk")" = "$before" ] ||
  note_failure "cow plugin untouched" "the plugin's file changed"

# cow-on-read=/PATH: copy-up only while the file exists (the map shows
# copied-up blocks as data where the plugin has a hole).
truncate -s 1M "$tmpdir/empty.img"
t "$NBDKIT" -U - --filter=cow file "$tmpdir/empty.img" \
  cow-on-read="$tmpdir/switch" --run '
  nbdsh -u "$uri" -c "h.pread(10, 0)"
  touch '"$tmpdir/switch"'
  nbdsh -u "$uri" -c "h.pread(10, 524288)"
  nbdinfo --map "$uri"' > "$tmpdir/switch.out" ||
  note_failure "cow on-read path" "server failed"
expect_in "cow on-read path" "$tmpdir/switch.out" \
  '^ +0 +524288 +3 +hole,zero$'
expect_in "cow on-read path" "$tmpdir/switch.out" '^ +524288 +65536 +0 +data$'

# Bad values: exit 1, one line naming the parameter.
for bad in cow-block-size=1000 cow-block-size=2048 cow-block-size=4G \
           cow-block-size=x cow-on-read=maybe cow-on-cache=2; do
  refuses "${bad%%=*}" --filter=cow memory 1M "$bad" ||
    note_failure "cow bad $bad" "not refused with one line naming ${bad%%=*}"
done

finish
