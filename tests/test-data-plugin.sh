#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The data plugin with real clients: the bytes of the man page's
# examples read back with nbdsh, a RAM disk that keeps what is written
# and shares it between connections, holes in the map where the data
# leaves them, size= cutting a repeat that would be a terabyte long
# (quickly: only what fits is rendered), $VAR from parameters and the
# environment, files and scripts, and --dump-plugin.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy qemu-img

# The MBR example, byte by byte.
t "$NBDKIT" -U - data '
  @0x1be           # first partition entry
    0 0 2 0 0x83 0x20 0x20 0
    le32:1 le32:0x7ff
  @0x1fe 0x55 0xaa
  ' size=1M --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 1048576
b = h.pread(512, 0)
assert b[0x1be:0x1ce] == bytes([0, 0, 2, 0, 0x83, 0x20, 0x20, 0,
                                1, 0, 0, 0, 0xff, 7, 0, 0]), b[0x1be:0x1ce]
assert b[510:] == bytes([0x55, 0xaa])
assert b[:0x1be] == bytes(0x1be)
assert h.pread(4096, 1048576 - 4096) == bytes(4096)
"' || fail "MBR example"

# qemu-img sees the partition table's disk as raw, 1 MiB.
t "$NBDKIT" -U - data '@0x1fe 0x55 0xaa' size=1M \
  --run 'qemu-img info --output=json "$uri"' > "$tmpdir/qi"
grep -q '"virtual-size": 1048576' "$tmpdir/qi" || fail "qemu-img info size"

# A RAM disk: writes stick and are seen by a second connection; trim
# and zero make ranges read as zeroes; flush and FUA succeed.
t "$NBDKIT" -U - data '(0x55 0xaa)*2048' size=64K --run '
nbdsh -u "$uri" -c "
assert h.can_multi_conn() and h.can_trim() and h.can_zero() and h.can_fua()
assert h.pread(4, 0) == b\"\x55\xaa\x55\xaa\"
h.pwrite(b\"hello\", 4000, nbd.CMD_FLAG_FUA)
h.zero(100, 0)
h.trim(2, 200)
h.flush()
"
nbdsh -u "$uri" -c "
assert h.pread(5, 4000) == b\"hello\"
assert h.pread(100, 0) == bytes(100)
assert h.pread(4, 200) == b\"\0\0\x55\xaa\"
assert h.pread(2, 4096) == bytes(2)
"' || fail "writes, zeroes and trims"

# Read-only with -r.
t "$NBDKIT" -r -U - data '1 2 3' --run 'nbdsh -u "$uri" -c "
assert h.is_read_only()
try:
    h.pwrite(b\"x\", 0)
    assert False
except nbd.Error as e:
    assert \"EPERM\" in str(e), e
"' || fail "-r"

# Holes where the data leaves them: 1 TiB with data at 0 and at 512 GiB.
t "$NBDKIT" -U - data '0x11 @549755813888 "middle" @^1099511627776' \
  --run 'nbdinfo --map "$uri"' | awk '{ print $1, $2, $3, $4 }' > "$tmpdir/map"
cat "$tmpdir/map"
cat > "$tmpdir/map.want" <<'MAP'
0 32768 0 data
32768 549755781120 3 hole,zero
549755813888 32768 0 data
549755846656 549755781120 3 hole,zero
MAP
diff -u "$tmpdir/map.want" "$tmpdir/map" || fail "map of a sparse 1 TiB disk"

# A repeat a terabyte long, cut to 1 MiB: fast, and the right bytes.
start=$(date +%s)
t "$NBDKIT" -U - data '("0123456789")*100000000000' size=1M \
  --run "nbdcopy \"\$uri\" $tmpdir/out"
(( $(date +%s) - start < 20 )) || fail "rendering 1 MiB of a huge repeat was slow"
/usr/bin/python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
want = (b"0123456789" * 104858)[:1048576]
assert d == want, "repeat bytes"
' "$tmpdir/out" || fail "bytes of a huge repeat"

# Variables: parameters win over the environment, which also works.
export DATA_TEST_ENV='9 8'
t "$NBDKIT" -U - data '$p*2 $DATA_TEST_ENV' p='0x55 0xaa' \
  --run 'nbdsh -u "$uri" -c "
assert h.pread(h.get_size(), 0) == bytes([0x55, 0xaa, 0x55, 0xaa, 9, 8])
"' || fail "variables"

# Files and scripts, with slices.
printf 'abcdefghij' > "$tmpdir/f"
t "$NBDKIT" -U - data "<$tmpdir/f[2:4] @^8 <(printf xyz)*2 </dev/zero[:3] 1" \
  --run 'nbdsh -u "$uri" -c "
assert h.pread(h.get_size(), 0) == b\"cd\0\0\0\0\0\0xyzxyz\0\0\0\x01\", \
  h.pread(h.get_size(), 0)
"' || fail "files and scripts"

# base64 and raw.
t "$NBDKIT" -U - data base64='aGVsbG8gbmJka2l0IHVzZXI=' \
  --run 'nbdcopy "$uri" -' > "$tmpdir/b64"
[ "$(cat "$tmpdir/b64")" = "hello nbdkit user" ] || fail "base64="
t "$NBDKIT" -U - data raw='Hello, world!' --run 'nbdcopy "$uri" -' \
  > "$tmpdir/raw"
[ "$(cat "$tmpdir/raw")" = "Hello, world!" ] || fail "raw="

# Parallel clients (nbdcopy, several connections) see one disk.
t "$NBDKIT" -U - data '(0x5a)*1048576' allocator=zstd \
  --run "nbdcopy --connections=4 --requests=16 \"\$uri\" $tmpdir/copy"
cmp "$tmpdir/copy" <(head -c 1048576 /dev/zero | tr '\0' Z) ||
  fail "nbdcopy with 4 connections"

"$NBDKIT" data --dump-plugin > "$tmpdir/dump"
grep -qx 'data_base64=yes' "$tmpdir/dump" || fail "--dump-plugin: data_base64"
