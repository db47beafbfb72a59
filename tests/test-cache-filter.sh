#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=cache: the same command gives the same bytes, map, flags and
# file contents as Debian's nbdkit with its cache filter, in each mode,
# at several block sizes, with cache-on-read; cache=writeback writes
# reach the file at flush and not before, cache=writethrough at once;
# cache=unsafe reports unflushed writes over the plugin's holes as data
# (where Debian's filter, which passes block status through, reports
# holes and nbdcopy then loses the data); bad values are refused with
# one line naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024 + 12345))
/usr/bin/python3 - "$disk.orig" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    for off in (70000, 300000, 1000000, 4 * 1024 * 1024 + 10000):
        f.seek(off)
        f.write(b"small run %d " % off * 50)
PY
state_files=("$disk")

compare_own "cache read" read --filter=cache file "$disk"
compare_own "cache read on-read" read --filter=cache file "$disk" \
  cache-on-read=true
compare_own "cache write" write --filter=cache file "$disk"
compare_own "cache write writethrough" write --filter=cache file "$disk" \
  cache=writethrough
compare_own "cache write 4K" write --filter=cache file "$disk" \
  cache-min-block-size=4K cache-on-read=true
compare_own "cache write max-size" write --filter=cache file "$disk" \
  cache-max-size=1M cache-on-read=true

# Stacked with cow (both ours against both Debian's).
compare_own "cache under cow" write --filter=cow --filter=cache file "$disk" \
  cache-on-read=true
compare_own "cache over cow" write --filter=cache --filter=cow file "$disk"

# Where Debian's cache filter gives wrong bytes, the right answer is
# the plugin's own, with no filter: compare_plain LABEL PROBE FILTER-ARGS
# runs our server with --filter=cache FILTER-ARGS and Debian's with the
# file plugin alone, and compares the bytes (the sha256 lines: what a
# client reads and what reached the file), not the map (whole blocks
# written by the cache allocate more of the file than the plugin's own
# writes).
compare_plain ()
{
  local label="$1" probe="$2" _own_filters=1
  shift 2
  local name="$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' _)"
  _run_one "$NBDKIT" "$tmpdir/out/$name.ours" "$probe" \
    --filter=cache file "$disk" "$@"
  _run_one "$ref_nbdkit" "$tmpdir/out/$name.ref" "$probe" file "$disk"
  grep -E '^[0-9a-f]{64}$|sha256|^copy|^state|^exit' "$tmpdir/out/$name.ours" \
    > "$tmpdir/out/$name.ours.sha"
  grep -E '^[0-9a-f]{64}$|sha256|^copy|^state|^exit' "$tmpdir/out/$name.ref" \
    > "$tmpdir/out/$name.ref.sha"
  cmp -s "$tmpdir/out/$name.ours.sha" "$tmpdir/out/$name.ref.sha" ||
    note_failure "$label" "bytes differ from the plugin's own:" \
      "$(diff "$tmpdir/out/$name.ref.sha" "$tmpdir/out/$name.ours.sha")"
}

# Debian's nbdkit 1.32 cache filter gives bytes that differ from the
# plugin's own with 1M blocks on this disk (whose last block is short),
# and after evicting dirty blocks (cache-max-size): there the right
# answer is the plugin's.
compare_plain "cache write 1M" write cache-min-block-size=1M
compare_plain "cache write evict" write cache-max-size=1M \
  cache-high-threshold=30 cache-low-threshold=10
# (Not write over memory: our memory plugin and Debian's map stored zeroes
# differently, which is not about the filter.)
compare_own "cache read memory" read --filter=cache memory 3M

# Writes of every shape, flushed, read back; then the map.
cat > "$tmpdir/shapes" <<EOS
#!/bin/sh
set -e
nbdsh -u "\$1" -c '
import hashlib
size = h.get_size()
h.pread(200000, 0)
h.pwrite(b"A" * 5, 65530)                       # across a block edge
h.pwrite(b"B" * 200000, 400000)                 # partial, whole, partial
h.pwrite(b"C" * 65536, 1 << 20, nbd.CMD_FLAG_FUA)
h.zero(70000, 2 << 20)
h.trim(1000, 3 << 20 | 500)
h.pwrite(b"D" * 100, size - 100)                # the last, short block
h.cache(65536 * 3, 0)
h.flush()
print(hashlib.sha256(h.pread(size, 0)).hexdigest())
'
nbdinfo --map "\$1"
EOS
chmod +x "$tmpdir/shapes"
for args in "" cache=writethrough "cache-on-read=true cache-min-block-size=4K"; do
  compare_own "cache shapes $args" "$tmpdir/shapes" --filter=cache file "$disk" \
    $args
done
compare_plain "cache shapes evict" "$tmpdir/shapes" cache-max-size=1M \
  cache-high-threshold=50 cache-low-threshold=10
compare_plain "cache shapes unsafe evict" "$tmpdir/shapes" cache=unsafe \
  cache-max-size=1M cache-high-threshold=20 cache-low-threshold=10

# writeback: nothing reaches the file before flush, all of it after;
# writethrough: at once.  The second client checks the file between.
cp "$disk.orig" "$disk"
cat > "$tmpdir/when.py" <<EOS
import os
def file_has(data, off):
    with open("$disk", "rb") as f:
        f.seek(off)
        return f.read(len(data)) == data
h.pwrite(b"W" * 5000, 123456)
h.zero(4096, 2 << 20)
early = file_has(b"W" * 5000, 123456)
h.flush()
print("before-flush", early, "after-flush", file_has(b"W" * 5000, 123456),
      file_has(bytes(4096), 2 << 20))
EOS
for mode in writeback writethrough unsafe; do
  cp "$disk.orig" "$disk"
  t "$NBDKIT" -U - --filter=cache file "$disk" cache=$mode --run \
    'nbdsh -u "$uri" -c "exec(open(\"'"$tmpdir/when.py"'\").read())"' \
    > "$tmpdir/when.$mode" 2>&1 || note_failure "cache $mode timing" "failed"
done
expect_in "cache writeback timing" "$tmpdir/when.writeback" \
  '^before-flush False after-flush True True$'
expect_in "cache writethrough timing" "$tmpdir/when.writethrough" \
  '^before-flush True after-flush True True$'
expect_in "cache unsafe timing" "$tmpdir/when.unsafe" \
  '^before-flush False after-flush False False$'

# unsafe: an unflushed write over a hole of the plugin is data in the
# map, and nbdcopy (which skips holes) copies it.
truncate -s 1M "$tmpdir/holes.img"
t "$NBDKIT" -U - --filter=cache file "$tmpdir/holes.img" cache=unsafe --run '
  nbdsh -u "$uri" -c "h.pwrite(b\"U\" * 4096, 65536 * 3)"
  nbdinfo --map "$uri"
  nbdcopy "$uri" - | tr -d "\\000" | wc -c' > "$tmpdir/unsafe.out" ||
  note_failure "cache unsafe map" "failed"
expect_in "cache unsafe map" "$tmpdir/unsafe.out" '^ +196608 +65536 +0 +data$'
expect_in "cache unsafe map" "$tmpdir/unsafe.out" '^4096$'

# cache-on-read=/PATH: reads fill the cache only while the file exists;
# afterwards a change to the file behind the server's back shows only
# where nothing was cached.
printf 'AAAA' > "$tmpdir/small.img"
truncate -s 1M "$tmpdir/small.img"
t "$NBDKIT" -U - --filter=cache file "$tmpdir/small.img" \
  cache-on-read="$tmpdir/switch" --run '
  nbdsh -u "$uri" -c "h.pread(4, 0)"
  printf BBBB | dd of='"$tmpdir/small.img"' conv=notrunc status=none
  nbdsh -u "$uri" -c "print(h.pread(4, 0))"
  touch '"$tmpdir/switch"'
  nbdsh -u "$uri" -c "print(h.pread(4, 0))"
  printf CCCC | dd of='"$tmpdir/small.img"' conv=notrunc status=none
  nbdsh -u "$uri" -c "print(h.pread(4, 0))"' > "$tmpdir/switch.out" ||
  note_failure "cache on-read path" "failed"
[ "$(tr -d '\n' < "$tmpdir/switch.out")" = \
  "bytearray(b'BBBB')bytearray(b'BBBB')bytearray(b'BBBB')" ] ||
  note_failure "cache on-read path" "got: $(cat "$tmpdir/switch.out")"

# Bad values: exit 1, one line naming the parameter.
for bad in cache=fast cache-min-block-size=1000 cache-min-block-size=2048 \
           cache-max-size=4K cache-max-size=x cache-high-threshold=0 \
           cache-high-threshold=101 cache-low-threshold=-1 \
           cache-low-threshold=99 cache-on-read=maybe; do
  refuses "${bad%%=*}" --filter=cache memory 1M "$bad" ||
    note_failure "cache bad $bad" "not refused with one line naming ${bad%%=*}"
done

finish
