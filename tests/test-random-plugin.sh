#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The random plugin: for the same seed our server and Debian's nbdkit
# 1.32 give the same size, flags, map and bytes, also for unaligned
# reads; writes of the same bytes succeed and of other bytes fail with
# EIO; trim and zero fail with EIO; bad parameters are refused with one
# line naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

cat > "$tmpdir/odd" <<'EOF2'
#!/usr/bin/env bash
exec nbdsh -u "$1" -c '
import hashlib
size = h.get_size()
for off, n in [(0, 1), (1, 4095), (4095, 2), (12345, 54321), (size - 7, 7)]:
    print(off, n, hashlib.sha256(h.pread(n, off)).hexdigest())
d = h.pread(10000, 777)
for name, buf in [("same", d), ("flipped", d[:-1] + bytes([d[-1] ^ 1]))]:
    try:
        h.pwrite(buf, 777)
        print("write", name, "ok")
    except nbd.Error as e:
        print("write", name, e.errnum)
for name, fn in [("zero", h.zero), ("trim", h.trim), ("cache", h.cache)]:
    try:
        fn(4096, 0)
        print(name, "ok")
    except nbd.Error as e:
        print(name, e.errnum)
'
EOF2
chmod +x "$tmpdir/odd"

compare random-seed1 read random 8M seed=1
compare random-seed-max read random size=1000003 seed=4294967295
compare random-seed-hex read random 1M seed=0x10
compare random-nosize read random
compare random-odd "$tmpdir/odd" random 4M seed=99

# The same seed gives the same bytes; another seed other bytes.
for s in 5 5 6; do
  t "$NBDKIT" -U - random 1M seed=$s --run 'nbdcopy "$uri" -' | sha256sum
done > "$tmpdir/sums"
[ "$(sed -n 1p "$tmpdir/sums")" = "$(sed -n 2p "$tmpdir/sums")" ] &&
  [ "$(sed -n 1p "$tmpdir/sums")" != "$(sed -n 3p "$tmpdir/sums")" ] ||
  note_failure random-repeatable "$(cat "$tmpdir/sums")"

# A copy onto itself over several connections checks every write.
t "$NBDKIT" -U - random 32M seed=4 \
  --run 'nbdcopy --connections=4 "$uri" "$uri"' ||
  note_failure random-self-copy "nbdcopy onto itself failed"

for bad in seed=-1 seed=4294967296 seed=abc size=abc nosuch=1; do
  refuses "random.*${bad%%=*}" random 1M "$bad" ||
    note_failure "random-bad-$bad" "not refused with one line naming ${bad%%=*}"
done

finish
