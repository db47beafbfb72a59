#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The partitioning plugin: for the same files and parameters, our server
# and Debian's nbdkit 1.32 give the same size, flags, map and bytes (MBR
# with primary and logical partitions, GPT with 128 and 256 entries,
# alignment, mbr-id, type-guid, partition names), GPT unique partition
# GUIDs aside: they are random in both, so they and the CRCs over them
# are blanked before hashing, and our CRCs are checked to be right.
# Writes to partitions, the table and the padding have the same
# outcomes and leave the same bytes in the files.  sfdisk reads our
# tables; bad parameters are refused with one line naming them.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
PATH="$PATH:/usr/sbin:/sbin"
requires_cmd sfdisk

d="$tmpdir/parts"
mkdir -p "$d/many"
make_pattern "$d/p1" $((1024 * 1024))
make_pattern "$d/p2" 100000
truncate -s 3M "$d/p3"
printf 'five!' > "$d/five"
for i in 1 2 3 4 5 6; do make_pattern "$d/q$i" $((i * 100000)); done
for i in $(seq 1 130); do printf 'm%d' "$i" > "$d/many/m$i"; done
long="$d/a name that is longer than thirty-six characters"
make_pattern "$long" 4096
make_pattern "$d/é.img" 4096
cd "$d"

# PROBE URI: flags, map, and the hash of the disk with GPT unique GUIDs
# and the CRCs over them blanked; "crc-ok" says our CRCs are right.
cat > "$tmpdir/norm.py" <<'EOF2'
import sys, struct, zlib, hashlib
d = bytearray(sys.stdin.buffer.read())
out = []
if d[512:520] == b"EFI PART":
    for hoff in (512, len(d) - 512):
        h = d[hoff:hoff + 512]
        hs, crc = struct.unpack("<II", h[12:20])
        hh = bytearray(h[:hs]); hh[16:20] = bytes(4)
        lba, = struct.unpack("<Q", h[72:80])
        n, es, ecrc = struct.unpack("<III", h[80:92])
        ents = d[lba * 512:lba * 512 + n * es]
        out.append("crc-ok %s %s" % (zlib.crc32(hh) == crc,
                                     zlib.crc32(ents) == ecrc))
        for i in range(n):
            o = lba * 512 + i * es + 16
            d[o:o + 16] = bytes(16)
        d[hoff + 16:hoff + 20] = bytes(4)
        d[hoff + 88:hoff + 92] = bytes(4)
print(" ".join(out), "disk", hashlib.sha256(d).hexdigest())
EOF2
cat > "$tmpdir/read" <<EOF2
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 $probedir/flags.py
nbdinfo --map "\$1"
nbdcopy "\$1" - | /usr/bin/python3 $tmpdir/norm.py
EOF2
chmod +x "$tmpdir/read"

compare partitioning-mbr1 "$tmpdir/read" partitioning p1
compare partitioning-mbr3 "$tmpdir/read" partitioning p1 p2 p3
compare partitioning-mbr-dos "$tmpdir/read" partitioning partition-type=dos \
  five p2
compare partitioning-mbr-logical "$tmpdir/read" partitioning \
  partition-type=mbr q1 q2 q3 q4 q5 mbr-id=0x82 q6
compare partitioning-mbr-ids "$tmpdir/read" partitioning mbr-id=0x0c p2 \
  mbr-id=130 five mbr-id=default p1 mbr-id=077 p3
compare partitioning-mbr-align "$tmpdir/read" partitioning alignment=512 \
  five five alignment=4k p2 alignment=64K five
compare partitioning-gpt "$tmpdir/read" partitioning partition-type=gpt \
  p1 p2 p3
compare partitioning-gpt-auto "$tmpdir/read" partitioning alignment=512 \
  q1 q2 q3 q4 q5
compare partitioning-gpt-types "$tmpdir/read" partitioning \
  partition-type=GPT type-guid=C12A7328-F81F-11D2-BA4B-00A0C93EC93B p2 \
  type-guid='{0657fd6d-a4ab-43c4-84e5-0933c84b4f4f}' five \
  type-guid=default alignment=4096 p1
compare partitioning-gpt-names "$tmpdir/read" partitioning \
  partition-type=gpt "$long" "é.img" "$d/p2" ./five
compare partitioning-gpt-256 "$tmpdir/read" partitioning alignment=512 \
  many/m*
compare partitioning-readonly "$tmpdir/read" -r partitioning p1 p2

# Writes: to a partition (and across its end into the padding, with
# zeroes), to the table (same bytes, then others), to padding (zeroes,
# then others); outcomes and the files' bytes must match.
for f in p1 p2 five; do cp "$f" "$f.orig"; done
state_files=("$d/p1" "$d/p2" "$d/five")
cat > "$tmpdir/write" <<'EOF2'
#!/bin/sh
exec nbdsh -u "$1" -c '
import errno
def op(name, fn):
    try:
        fn()
        print(name, "ok")
    except nbd.Error as e:
        print(name, "error", errno.errorcode.get(e.errnum, e.errnum))
M = 1 << 20
mbr = h.pread(512, 0)
op("table-same", lambda: h.pwrite(mbr, 0))
op("table-other", lambda: h.pwrite(b"\1" + mbr[1:], 0))
op("pad-zero", lambda: h.pwrite(bytes(4096), 4096))
op("pad-other", lambda: h.pwrite(b"x", 8192))
op("p1", lambda: h.pwrite(b"hello" * 1000, M + 12345))
op("p1-end", lambda: h.pwrite(b"y" * 512, 2 * M - 512))
op("p2-into-pad", lambda: h.pwrite(b"z" * 100000 + bytes(352), 2 * M))
op("p2-pad-other", lambda: h.pwrite(b"z" * 100001, 2 * M))
op("five", lambda: h.pwrite(b"FIVE!", 3 * M))
op("five-over", lambda: h.pwrite(b"FIVE!!", 3 * M))
op("zero-p1", lambda: h.zero(65536, M))
op("flush", lambda: h.flush())
import hashlib
print("pread", hashlib.sha256(h.pread(h.get_size(), 0)).hexdigest())
'
EOF2
chmod +x "$tmpdir/write"
compare partitioning-write "$tmpdir/write" partitioning p1 p2 five
expect_in partitioning-write-outcomes "$ours" '^table-other error EIO$'
expect_in partitioning-write-outcomes "$ours" '^p2-into-pad ok$'
state_files=()

# sfdisk reads what we serve: starts and sizes in sectors.
t "$NBDKIT" -U - partitioning q1 q2 q3 q4 q5 mbr-id=0x82 q6 \
  partition-type=mbr --run 'nbdcopy "$uri" '"$tmpdir/mbr.img"
sfdisk -d "$tmpdir/mbr.img" | grep -E '^/' | sed 's/^[^:]*img//' \
  > "$tmpdir/sfdisk"
cat > "$tmpdir/sfdisk.want" <<'EOF2'
1 : start=        2048, size=         196, type=83, bootable
2 : start=        4096, size=         391, type=83
3 : start=        6144, size=         586, type=83
4 : start=        6730, size=        6730, type=f
5 : start=        8192, size=         782, type=83
6 : start=       10240, size=         977, type=83
7 : start=       12288, size=        1172, type=82
EOF2
diff -u "$tmpdir/sfdisk.want" "$tmpdir/sfdisk" ||
  note_failure partitioning-sfdisk-mbr "sfdisk sees another MBR layout"
t "$NBDKIT" -U - partitioning partition-type=gpt p1 p2 \
  --run 'nbdcopy "$uri" '"$tmpdir/gpt.img"
sfdisk --verify "$tmpdir/gpt.img" > "$tmpdir/verify" 2>&1 ||
  note_failure partitioning-sfdisk-gpt "$(cat "$tmpdir/verify")"
sfdisk -d "$tmpdir/gpt.img" | grep -q 'start=        4096, size=         196, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4.*name="p2"' ||
  note_failure partitioning-sfdisk-gpt "$(sfdisk -d "$tmpdir/gpt.img")"

# More than an MBR holds: automatic GPT, and an error for mbr.
big=$(( 4294967295 * 512 - 5 * 1048576 + 1 ))
if truncate -s "$big" "$tmpdir/big" 2>/dev/null; then
  t "$NBDKIT" -U - partitioning "$tmpdir/big" \
    --run 'nbdsh -u "$uri" -c "assert h.pread(8, 512) == b\"EFI PART\""' ||
    note_failure partitioning-big-auto "a 2 TB file did not give a GPT"
  status=0
  "$NBDKIT" -U - partitioning partition-type=mbr "$tmpdir/big" --run true \
    > "$tmpdir/big.out" 2>&1 || status=$?
  [ "$status" -eq 1 ] && grep -q partition-type "$tmpdir/big.out" ||
    note_failure partitioning-big-mbr "$(cat "$tmpdir/big.out")"
  rm -f "$tmpdir/big"
fi

# Bad parameters: one line naming the parameter, exit 1.  Debian's
# nbdkit aborts on an alignment that is not a power of two (1536).
: > "$tmpdir/empty"
for bad in alignment=1000 alignment=1536 alignment=256 alignment=2M \
           alignment=abc mbr-id=0x100 mbr-id=-1 mbr-id=abc type-guid=abc \
           type-guid=0FC63DAF84834772-8E79-3D69D8477DE4 partition-type=foo \
           nosuch=1 "file=$tmpdir/empty" "file=$tmpdir/nonexistent" file=; do
  refuses "partitioning.*${bad%%=*}" partitioning "$bad" p1 ||
    note_failure "partitioning-bad-$bad" \
      "not refused with one line naming ${bad%%=*}"
done
status=0
"$NBDKIT" -U - partitioning --run true > "$tmpdir/bad.out" 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "partitioning.*file" "$tmpdir/bad.out" ||
  note_failure partitioning-no-file "status $status: $(cat "$tmpdir/bad.out")"

finish
