#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The split plugin: files of odd sizes, sparse and not, joined as one
# disk give the same size, flags, map and bytes as under Debian's nbdkit
# 1.32, and writes to the first file land in the same bytes; writes to
# the other files and across files are checked against a model of the
# disk (Debian's nbdkit writes those at the wrong place).  Debian's split plugin crashes (SIGSEGV) when nbdcopy
# asks for block status, so the comparison uses nbdinfo --map and a
# copy without extents, and our nbdcopy copy (with extents, several
# connections) is checked against the files themselves instead.  Also:
# -r, an empty file in the middle, a missing file and no file at all.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

d="$tmpdir/files"
mkdir "$d"
make_pattern "$d/a.orig" $((1024 * 1024 + 12345))
truncate -s 300001 "$d/b.orig"
printf 'in the middle of b' |
  dd of="$d/b.orig" bs=1 seek=150000 conv=notrunc status=none
: > "$d/empty.orig"
head -c 200000 /dev/urandom > "$d/c.orig"
make_pattern "$d/e.orig" $((2 * 1024 * 1024))
files=("$d/a" "$d/b" "$d/empty" "$d/c" "$d/e")
for f in "${files[@]}"; do cp --sparse=always "$f.orig" "$f"; done
state_files=("${files[@]}")

cat > "$tmpdir/read" <<EOF2
#!/bin/sh
set -e
uri="\$1"
nbdinfo --json "\$uri" | /usr/bin/python3 $probedir/flags.py
nbdinfo --map "\$uri"
echo "copy-all \$(nbdcopy --no-extents "\$uri" - | sha256sum)"
EOF2
# Writes (WRITES, a Python list of (offset, count)), then everything
# read back by pread.
cat > "$tmpdir/write.py" <<'EOF2'
import hashlib, os
a = 1024 * 1024 + 12345
b = a + 300001
c = b + 200000
sets = {
    "first": [(0, 65536), (70000, 4096), (a - 10, 10)],
    "inside": [(a + 100, 4096), (b + 10, 1000), (c + 4096, 65536)],
    "across": [(a - 5, 10), (b - 3000, 7000), (c - 1, 2), (1000, 3 * a // 2)],
}
writes = sets[os.environ["WRITES"]]
zero = {"first": 8192, "inside": a + 8192, "across": b - 2500}[os.environ["WRITES"]]
def apply(pwrite, size):
    for off, n in writes:
        n = min(n, size - off)
        pwrite(bytes((off + i) % 253 for i in range(n)), off)
EOF2
cat > "$tmpdir/write" <<EOF2
#!/bin/sh
exec nbdsh -u "\$1" -c '
exec(open("$tmpdir/write.py").read())
apply(h.pwrite, h.get_size())
h.zero(5000, zero)
print("pread", hashlib.sha256(h.pread(h.get_size(), 0)).hexdigest())
'
EOF2
chmod +x "$tmpdir/read" "$tmpdir/write"

compare split-read "$tmpdir/read" split "${files[@]}"
compare split-read-ro "$tmpdir/read" -r split "${files[@]}"
compare split-file-key "$tmpdir/read" split file="$d/c" "$d/b" file="$d/a"
WRITES=first compare split-write "$tmpdir/write" split "${files[@]}"
compare split-one "$tmpdir/read" split "$d/e"

# The right answer where Debian's nbdkit crashes: nbdcopy (which uses
# block status) over several connections gives the files' bytes, and
# the map agrees with the files' holes.
for f in "${files[@]}"; do cp --sparse=always "$f.orig" "$f"; done
want="$(cat "${files[@]}" | sha256sum)"
got="$(t "$NBDKIT" -U - split "${files[@]}" \
  --run 'nbdcopy --connections=4 --requests=8 "$uri" - | sha256sum')"
[ "$got" = "$want" ] || note_failure split-nbdcopy "copy $got, files $want"
t "$NBDKIT" -U - split "${files[@]}" --run 'nbdinfo --map "$uri"' \
  > "$tmpdir/map"
grep -Eq '^ +0 +65536 +0 +data$' "$tmpdir/map" &&
  grep -Eq '^ +65536 +196608 +3 +hole,zero$' "$tmpdir/map" ||
  note_failure split-map "$(head -5 "$tmpdir/map")"
# A self-copy checks that reads and writes map to the same bytes.
t "$NBDKIT" -U - split "${files[@]}" --run 'nbdcopy "$uri" "$uri"' ||
  note_failure split-self-copy "nbdcopy onto itself failed"
[ "$(cat "${files[@]}" | sha256sum)" = "$want" ] ||
  note_failure split-self-copy "the files changed"

# Writes to the other files and across files: Debian's nbdkit 1.32
# writes those to the wrong place (at the disk offset, growing the
# file), so the files are checked against a model of the disk instead.
for w in inside across; do
  for f in "${files[@]}"; do cp --sparse=always "$f.orig" "$f"; done
  WRITES=$w t "$NBDKIT" -U - split "${files[@]}" \
    --run "$tmpdir/write \"\$uri\"" > /dev/null
  cat "${files[@]}" > "$tmpdir/got"
  WRITES=$w /usr/bin/python3 - "$tmpdir" "${files[@]}" <<'PY'
import sys
tmp, files = sys.argv[1], sys.argv[2:]
exec(open(tmp + "/write.py").read())
d = bytearray(b"".join(open(f + ".orig", "rb").read() for f in files))
def pwrite(buf, off):
    d[off:off + len(buf)] = buf
apply(pwrite, len(d))
d[zero:zero + 5000] = bytes(5000)
open(tmp + "/want", "wb").write(d)
PY
  cmp -s "$tmpdir/want" "$tmpdir/got" ||
    note_failure split-write-$w "the files do not hold what was written"
done

# -r: writes fail with EPERM, the files are untouched.
t "$NBDKIT" -r -U - split "${files[@]}" --run 'nbdsh -u "$uri" -c "
import errno
try:
    h.pwrite(b\"x\", 0)
    assert False, \"write allowed\"
except nbd.Error as e:
    assert e.errnum == errno.EPERM, e
"' || note_failure split-readonly "a write under -r did not fail with EPERM"

# Bad parameters: one line naming the parameter, exit 1.
for bad in "$d/nonexistent" file="$d/nonexistent" nosuch=1 ""; do
  key=file
  [ "$bad" = nosuch=1 ] && key=nosuch
  refuses "split.*$key" split ${bad:+"$bad"} ||
    note_failure "split-bad-$bad" "not refused with one line naming $key"
done
# A directory is refused when a client connects.
t "$NBDKIT" -U - split "$d/a" "$d" --run 'nbdinfo --size "$uri"' \
  > "$tmpdir/dir.out" 2>&1 && note_failure split-dir "a directory was served"
grep -Eq "not a regular file|Is a directory" "$tmpdir/dir.out" ||
  note_failure split-dir "$(cat "$tmpdir/dir.out")"

finish
