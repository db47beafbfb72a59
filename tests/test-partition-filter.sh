#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=partition partition=N serves partition N of an MBR disk
# (primary and logical) or a GPT disk made by sfdisk: the size is the
# partition's, reads see its bytes, writes land inside it, the map is
# the partition's, and qemu-img sees the same bytes as in the file.
# Debian's nbdkit gives the same bytes and map on the same commands.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd sfdisk qemu-img

# Fill each partition of $1 (start:size in sectors, after $2) with
# blocks naming the partition and their offset, and leave a hole in each.
fill ()
{
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    for arg in sys.argv[2:]:
        num, start, size = (int(x) for x in arg.split(":"))
        start *= 512; size *= 512
        for off in range(0, size, 65536):
            if (off // 65536) % 4 == 3:
                continue                    # a hole
            n = min(32768, size - off)
            f.seek(start + off)
            f.write(b"".join(struct.pack(">HQ6x", num, off + i)
                             for i in range(0, n, 16)))
PY
}

# Partition N's start and size in sectors, as sfdisk reads them.
part ()
{
  sfdisk --dump "$1" | awk -v d="$1$2 " '
    index($0, d) == 1 {
      gsub(/[:,=]/, " "); print $3 ":" $5 }'
}

mbr="$tmpdir/mbr.img"
truncate -s 64M "$mbr"
sfdisk -q "$mbr" <<'EOF'
label: dos
start=2048, size=8192, type=83
start=10240, size=16384, type=83
start=26624, size=102400, type=5
start=28672, size=8192, type=83
start=38912, size=20480, type=83
start=61440, size=4096, type=83
EOF
gpt="$tmpdir/gpt.img"
truncate -s 32M "$gpt"
sfdisk -q "$gpt" <<'EOF'
label: gpt
start=2048, size=4096
start=8192, size=20480
start=30720, size=10240
EOF

args=()
for n in 1 2 5 6 7; do args+=("$n:$(part "$mbr" "$n")"); done
fill "$mbr" "${args[@]}"
args=()
for n in 1 2 3; do args+=("$n:$(part "$gpt" "$n")"); done
fill "$gpt" "${args[@]}"
cp "$mbr" "$mbr.orig"
cp "$gpt" "$gpt.orig"

# Our filter alone: size, bytes and a write, on every partition.
check ()
{
  local img="$1" n="$2" p start size
  p="$(part "$img" "$n")"
  start=$(( ${p%:*} * 512 ))
  size=$(( ${p#*:} * 512 ))
  start_server --filter=partition file "$img" partition="$n"
  t nbdsh -u "$uri" -c - <<PY || fail "$img partition $n"
import errno
f = open("$img", "rb")
f.seek($start)
want = f.read($size)
assert h.get_size() == $size, (h.get_size(), $size)
assert h.pread($size, 0) == want, "partition $n: wrong bytes"
assert h.pread(100, $size - 100) == want[-100:]
msg = b"written through partition $n"
h.pwrite(msg, 4096 + 3)
h.flush()
f.seek($start + 4096 + 3)
assert f.read(len(msg)) == msg, "write did not land in the partition"
h.set_strict_mode(0)
try:
    h.pread(512, $size)
except nbd.Error as ex:
    assert ex.errnum == errno.EINVAL, ex
else:
    raise AssertionError("read past the partition succeeded")
PY
  # qemu-img sees the partition's bytes, the same as the file's range.
  dd if="$img" of="$tmpdir/slice" bs=512 skip="${p%:*}" count="${p#*:}" \
     status=none
  t qemu-img compare -f raw -F raw "$uri" "$tmpdir/slice" >/dev/null ||
    fail "qemu-img compare: $img partition $n differs from the file"
  t qemu-img info --output=json "$uri" | grep -q "\"virtual-size\": $size" ||
    fail "qemu-img info: $img partition $n has the wrong size"
  stop_server
}
for n in 1 2 5 6 7; do check "$mbr" "$n"; done
for n in 1 2 3; do check "$gpt" "$n"; done
cp "$mbr.orig" "$mbr"
cp "$gpt.orig" "$gpt"

# The map of a partition with holes: one hole per 256 KiB.
start_server --filter=partition file "$gpt" partition=2
t nbdinfo --map "$uri" > "$tmpdir/map"
grep -Eq "^ *163840 +98304 +3 +hole,zero" "$tmpdir/map" ||
  { cat "$tmpdir/map"; fail "partition map: no hole at 163840"; }
stop_server

# Same command, same bytes, same map as Debian's nbdkit.
state_files=("$mbr" "$gpt")
for n in 1 2 5 7; do
  compare_own "partition mbr $n read" read --filter=partition file "$mbr" partition=$n
done
compare_own "partition mbr 6 write" write --filter=partition file "$mbr" partition=6
for n in 1 3; do
  compare_own "partition gpt $n read" read --filter=partition file "$gpt" partition=$n
done
compare_own "partition gpt 2 write" write --filter=partition file "$gpt" partition=2
finish

# Partitions that do not exist, and an extended partition.
cp "$mbr.orig" "$mbr"
for n in 4 3 8; do
  start_server --filter=partition file "$mbr" partition=$n
  expect_fail nbdinfo "$uri" >/dev/null 2>&1 ||
    fail "partition=$n of the MBR disk was served"
  stop_server
done

# Bad parameters: one line naming the parameter, exit 1.
for bad in partition=0 partition=-1 partition=x partition=; do
  status=0
  "$NBDKIT" --filter=partition null 1M "$bad" --run true \
            > "$tmpdir/msg" 2>&1 || status=$?
  [ "$status" -eq 1 ] || fail "$bad: exit $status, want 1"
  [ "$(wc -l < "$tmpdir/msg")" -eq 1 ] && grep -q partition "$tmpdir/msg" ||
    { cat "$tmpdir/msg"; fail "$bad: want one line naming partition"; }
done
status=0
"$NBDKIT" --filter=partition null 1M --run true > "$tmpdir/msg" 2>&1 ||
  status=$?
[ "$status" -eq 1 ] && grep -q 'partition.*required' "$tmpdir/msg" ||
  { cat "$tmpdir/msg"; fail "no partition=: exit $status, want 1"; }
