#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=ddrescue ddrescue-mapfile=FILE: reads that lie wholly in
# blocks the GNU ddrescue mapfile marks finished ('+') return the
# image's bytes; reads touching any other block, or beyond the map,
# fail with EIO; the export is read-only and offers no prefetch.
# Debian's nbdkit gives the same answers on the same commands, except
# for a read across two adjacent finished blocks, which it refuses
# (wrongly: every byte of it was rescued) and we serve.  Mapfiles that
# are not well formed stop the server with one line naming the
# parameter and the line.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024))
map="$tmpdir/disk.map"
# As ddrescue 1.27 writes it (tabs and spaces alike are blanks).
cat > "$map" <<'EOF2'
# Mapfile. Created by GNU ddrescue version 1.27
# Command line: ddrescue /dev/sdb disk.img disk.map
# Start time:   2024-01-01 10:00:00
# Current time: 2024-01-01 10:05:00
# Finished
# current_pos  current_status  current_pass
0x00011000     +               1
#      pos        size  status
0x00000000  0x00010000  +
0x00010000  0x00001000  -
0x00011000  0x0000F000  +
0x00020000  0x00008000  /
0x00028000  0x00008000  *
0x00030000  0x00010000  ?
0x00040000  0x00020000  +
0x00060000  0x00020000  +
EOF2

cat > "$tmpdir/reads" <<'SH'
#!/bin/sh
nbdinfo --json "$1" | /usr/bin/python3 "$(dirname "$0")/probes/flags.py"
nbdsh -u "$1" -c '
import hashlib
def op(name, count, offset):
    try:
        d = h.pread(count, offset)
        print(name, "ok", hashlib.sha256(d).hexdigest()[:16])
    except nbd.Error as e:
        print(name, "error", e.errno)
op("first-block", 65536, 0)
op("edge-before-bad", 512, 0x10000 - 512)
op("into-bad", 1024, 0x10000 - 512)
op("bad", 512, 0x10000)
op("after-bad", 4096, 0x11000)
op("up-to-unscraped", 512, 0x20000 - 512)
op("unscraped", 512, 0x20000)
op("untrimmed", 512, 0x28000)
op("untried", 65536, 0x30000)
op("beyond-map", 512, 0x80000)
op("far-beyond-map", 4096, 0xff000)
op("in-finished", 8192, 0x50000)
h.set_strict_mode(0)
for name, fn in (("write", lambda: h.pwrite(b"x" * 512, 0)),
                 ("cache", lambda: h.cache(512, 0))):
    try:
        fn()
        print(name, "ok")
    except nbd.Error as e:
        print(name, "error", e.errno)
'
SH
chmod +x "$tmpdir/reads"
compare_own ddrescue-reads "$tmpdir/reads" --filter=ddrescue file "$disk" \
  ddrescue-mapfile="$map"
expect_in ddrescue-reads "$ours" 'is_read_only=True can_cache=False'
expect_in ddrescue-reads "$ours" '^first-block ok '
expect_in ddrescue-reads "$ours" '^into-bad error EIO$'
expect_in ddrescue-reads "$ours" '^bad error EIO$'
expect_in ddrescue-reads "$ours" '^after-bad ok '
expect_in ddrescue-reads "$ours" '^untried error EIO$'
expect_in ddrescue-reads "$ours" '^beyond-map error EIO$'
expect_in ddrescue-reads "$ours" '^write error EPERM$'
# Block status passes through (this image has holes).
cat > "$tmpdir/map" <<'SH'
#!/bin/sh
nbdinfo --map "$1"
SH
chmod +x "$tmpdir/map"
compare_own ddrescue-map "$tmpdir/map" --filter=ddrescue file "$disk" \
  ddrescue-mapfile="$map"
expect_in ddrescue-map "$ours" '^ +65536 +196608 +3 +hole,zero$'

# Across the two adjacent finished blocks at 0x40000 and 0x60000: all
# of it was rescued, so it reads; and the bytes are the image's.
t "$NBDKIT" -U - --filter=ddrescue file "$disk" ddrescue-mapfile="$map" \
  --run 'nbdsh -u "$uri" -c "
d = h.pread(65536, 0x60000 - 32768)
assert d == open(\"'"$disk"'\", \"rb\").read()[0x60000 - 32768:0x68000]
"' || fail "a read across adjacent finished blocks failed"
# nbdcopy of the whole export fails (it meets bad blocks).
expect_fail t "$NBDKIT" -U - --filter=ddrescue file "$disk" \
  ddrescue-mapfile="$map" --run 'nbdcopy "$uri" /dev/null' 2>/dev/null ||
  fail "nbdcopy of a disk with bad blocks succeeded"
# A map that is all finished serves the whole image.
printf '0x0 +\n0x0 0x80000 +\n0x80000 0x80000 +\n' > "$tmpdir/all.map"
t "$NBDKIT" -U - --filter=ddrescue file "$disk" \
  ddrescue-mapfile="$tmpdir/all.map" --run "nbdcopy \"\$uri\" $tmpdir/copy" ||
  fail "nbdcopy of a fully rescued disk failed"
cmp "$disk" "$tmpdir/copy" || fail "nbdcopy read different bytes"

# Bad mapfiles and parameters: exit 1, one line naming the parameter.
bad ()
{
  refuses "$1" --filter=ddrescue null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
badmap ()
{
  local regex="$1"
  printf "$2" > "$tmpdir/bad.map"
  bad "^nbdkit: ddrescue: error: ddrescue-mapfile: $tmpdir/bad.map:$regex" \
    ddrescue-mapfile="$tmpdir/bad.map"
}
bad '^nbdkit: ddrescue: error: ddrescue-mapfile: .* is required$'
bad '^nbdkit: ddrescue: error: ddrescue-mapfile: /nonexistent: No such file' \
  ddrescue-mapfile=/nonexistent
bad '^nbdkit: ddrescue: error: ddrescue-mapfile: only one' \
  ddrescue-mapfile="$map" ddrescue-mapfile="$map"
badmap '1: bad status line' 'garbage\n'
badmap '1: bad status line' '0x0 X\n0x0 0x100 +\n'
badmap '1: bad status line' '0x0 + 0\n0x0 0x100 +\n'
badmap '1: bad status line' '0x0 + 1 extra\n0x0 0x100 +\n'
badmap '2: bad block line' '0x0 +\n0x0 0x100\n'
badmap '2: bad block line' '0x0 +\n0x0 0x100 F\n'
badmap '2: bad block line' '0x0 +\n0x0 0x100 ++\n'
badmap '2: bad block line' '0x0 +\n-0x10 0x100 +\n'
badmap '2: bad block line' '0x0 +\n0x0 0xzz +\n'
badmap '2: bad block line' '0x0 +\n0x0 0x100 + trailing\n'
badmap '2: bad block line' '0x0 +\n0x0 0x10000000000000000 +\n'
badmap '2: bad block size' '0x0 +\n0x0 0x0 +\n'
badmap '2: bad block size' '0x0 +\n0x7fffffffffffff00 0x200 +\n'
badmap '3: block overlaps' '0x0 +\n0x0 0x200 +\n0x100 0x200 -\n'
badmap '3: block overlaps' '0x0 +\n0x200 0x200 +\n0x0 0x200 -\n'
badmap '2: NUL byte' '0x0 +\n0x0\0 0x200 +\n'
badmap ' no status line' '# only a comment\n\n'
badmap ' no blocks' '0x0 +\n'
bad "^nbdkit: null: error: unknown parameter 'ddrescue'" ddrescue=1
finish
