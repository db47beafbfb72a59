#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A damaged or hostile partition table never crashes the partition
# filter: each corruption of an sfdisk-made MBR or GPT disk (loops,
# pointers outside the disk, overlaps, absurd sizes, overflowing
# sector numbers) is refused when the client opens the export, with
# an error saying why, and the server goes on serving.  Then hundreds
# of random corruptions, each either served inside the disk or refused.
source "$(dirname "$0")/functions.sh"
requires_cmd sfdisk nbdinfo nbdsh

disk="$tmpdir/disk.img"
mbr="$tmpdir/mbr.img"
gpt="$tmpdir/gpt.img"
truncate -s 8M "$mbr" "$gpt"
# Extended partition at sector 6144; EBRs at 6144 (logical 5 at 8192)
# and 10240 (logical 6 at 12288).
sfdisk -q "$mbr" <<'EOF'
label: dos
start=2048, size=2048, type=83
start=4096, size=2048, type=83
start=6144, size=8192, type=5
start=8192, size=2048, type=83
start=12288, size=2048, type=83
EOF
sfdisk -q "$gpt" <<'EOF'
label: gpt
start=2048, size=2048
start=4096, size=2048
EOF
cp "$mbr" "$disk"

# The server reads the table at every connection: one server, the
# file rewritten between connections.
start_server --filter=partition file "$disk" partition=1 \
  2> "$tmpdir/server.log"

cat > "$tmpdir/patch.py" <<'PY'
# patch.py BASE OUT CASE: write BASE with one corruption into OUT.
import struct, sys
base, out, case = sys.argv[1:4]
d = bytearray(open(base, "rb").read())
def mbr(i, typ=None, start=None, size=None, sector=0):
    o = sector * 512 + 0x1be + 16 * i
    if typ is not None: d[o + 4] = typ
    if start is not None: struct.pack_into("<I", d, o + 8, start)
    if size is not None: struct.pack_into("<I", d, o + 12, size)
def gpt_hdr(fmt, off, v): struct.pack_into(fmt, d, 512 + off, v)
def gpt_entry(i, first=None, last=None, zero_type=False):
    lba, = struct.unpack_from("<Q", d, 512 + 72)
    esz, = struct.unpack_from("<I", d, 512 + 84)
    o = lba * 512 + i * esz
    if first is not None: struct.pack_into("<Q", d, o + 32, first)
    if last is not None: struct.pack_into("<Q", d, o + 40, last)
    if zero_type: d[o:o + 16] = bytes(16)
cases = {
  "no-signature": lambda: d.__setitem__(slice(510, 512), b"\0\0"),
  "mbr-outside": lambda: mbr(0, start=0xfffff000, size=0xfff),
  "mbr-overlap": lambda: mbr(1, start=3000),
  "mbr-empty": lambda: mbr(0, typ=0),
  "ebr-self-loop": lambda: mbr(1, start=0, sector=6144),
  "ebr-loop": lambda: mbr(1, start=0, sector=10240) or mbr(1, typ=5, size=4096, sector=10240),
  "ebr-outside": lambda: mbr(1, start=0xfffffff0, sector=6144),
  "ebr-no-signature": lambda: d.__setitem__(slice(10240 * 512 + 510, 10240 * 512 + 512), b"\0\0"),
  "logical-outside": lambda: mbr(0, start=2048, size=0xffffffff, sector=6144),
  "logical-covers-ebr": lambda: mbr(0, start=0, sector=6144),
  "logical-overlap": lambda: mbr(0, size=5000, sector=6144),
  "extended-outside": lambda: mbr(2, size=0xffffff00),
  "gpt-entry-size": lambda: gpt_hdr("<I", 84, 0),
  "gpt-huge-array": lambda: gpt_hdr("<I", 80, 0xffffffff) or gpt_hdr("<I", 84, 0xffffffff),
  "gpt-array-overflow": lambda: gpt_hdr("<Q", 72, 0xffffffffffffffff),
  "gpt-array-outside": lambda: gpt_hdr("<Q", 72, 16380),
  "gpt-last-before-first": lambda: gpt_entry(0, first=3000, last=2999),
  "gpt-overflow": lambda: gpt_entry(0, first=1 << 63, last=(1 << 64) - 1),
  "gpt-outside": lambda: gpt_entry(0, last=1 << 40),
  "gpt-overlap": lambda: gpt_entry(1, first=3000),
  "gpt-covers-table": lambda: gpt_entry(0, first=1),
  "gpt-unused": lambda: gpt_entry(0, zero_type=True),
  "gpt-too-few-entries": lambda: gpt_hdr("<I", 80, 0),
}
cases[case]()
open(out, "r+b").write(d)
PY

# expect IMAGE CASE PARTITION REGEX: the client is refused, the log
# says REGEX, and the server still runs.
expect ()
{
  local img="$1" case="$2" n="$3" regex="$4"
  /usr/bin/python3 "$tmpdir/patch.py" "$img" "$disk" "$case"
  stop_server
  start_server --filter=partition file "$disk" partition="$n" \
    2> "$tmpdir/server.log"
  if t nbdinfo "$uri" > /dev/null 2>&1; then
    fail "$case: partition=$n was served"
  fi
  grep -Eq "$regex" "$tmpdir/server.log" ||
    { cat "$tmpdir/server.log"; fail "$case: no /$regex/ in the log"; }
  kill -0 "$server_pid" || fail "$case: the server died"
}
expect "$mbr" no-signature 1 'neither an MBR nor a GPT'
expect "$mbr" mbr-outside 1 'partition 1 lies outside the disk'
expect "$mbr" mbr-overlap 1 'MBR: partition 2 overlaps partition 1'
expect "$mbr" mbr-empty 1 'MBR partition 1 not found'
expect "$mbr" ebr-self-loop 6 'chain of EBRs loops back at partition 6'
expect "$mbr" ebr-loop 9 'chain of EBRs loops back at partition 7'
expect "$mbr" ebr-outside 6 'EBR of partition 6 lies outside'
expect "$mbr" ebr-no-signature 6 'EBR of partition 6 has no 0x55 0xAA'
expect "$mbr" logical-outside 5 'logical partition 5 lies outside'
expect "$mbr" logical-covers-ebr 5 'logical partition 5 lies outside'
expect "$mbr" logical-overlap 6 'partition 6 overlaps partition 5'
expect "$mbr" extended-outside 5 'extended partition lies outside the disk'
expect "$gpt" gpt-entry-size 1 'entries of 0 bytes are too small'
expect "$gpt" gpt-huge-array 1 'entry array .* is too large'
expect "$gpt" gpt-array-overflow 1 'entry array lies outside the disk'
expect "$gpt" gpt-array-outside 1 'entry array lies outside the disk'
expect "$gpt" gpt-last-before-first 1 'GPT partition 1 lies outside'
expect "$gpt" gpt-overflow 1 'GPT partition 1 lies outside'
expect "$gpt" gpt-outside 1 'GPT partition 1 lies outside'
expect "$gpt" gpt-overlap 1 'GPT: partition 2 overlaps partition 1'
expect "$gpt" gpt-covers-table 1 'GPT: partition 1 overlaps the partition table'
expect "$gpt" gpt-unused 1 'GPT partition 1 is unused'
expect "$gpt" gpt-too-few-entries 1 'GPT partition 1 not found'

# Random damage: 400 connections, each after flipping bytes of the
# table (sector 0, 1, the GPT entries or the EBRs).  Each one is either
# served, and then reads of its first and last bytes work, or refused;
# the server survives them all.
for run in "$mbr 1" "$mbr 5" "$gpt 1" "$gpt 2"; do
  img="${run% *}" n="${run#* }"
  stop_server
  cp "$img" "$disk"
  start_server --filter=partition file "$disk" partition=$n \
    2> "$tmpdir/server.log"
  t nbdsh -c - <<PY
import random
rnd = random.Random($n)
base = open("$img", "rb").read()
served = refused = 0
for i in range(100):
    d = bytearray(base)
    for j in range(rnd.randint(1, 8)):
        sector = rnd.choice([0, 1, 2, 6144, 10240])
        off = sector * 512 + rnd.choice([rnd.randrange(512),
                                         0x1be + rnd.randrange(64),
                                         rnd.randrange(128) + 32 if sector == 2 else 72 + rnd.randrange(16)])
        d[off] = rnd.randrange(256)
    with open("$disk", "r+b") as f:
        f.write(d)
    c = nbd.NBD()
    try:
        c.connect_unix("$sock")
    except nbd.Error:
        refused += 1
        continue
    size = c.get_size()
    if size > 0:
        c.pread(min(size, 512), 0)
        c.pread(min(size, 512), size - min(size, 512))
    c.shutdown()
    served += 1
print("$img partition $n: served", served, "refused", refused)
assert refused > 0
PY
  kill -0 "$server_pid" || fail "random damage killed the server"
done
