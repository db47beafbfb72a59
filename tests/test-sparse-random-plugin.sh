#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sparse-random plugin: for the same parameters and seed, our server
# and Debian's nbdkit 1.32 give the same size, flags, map and bytes
# (aligned reads as nbdcopy makes them, and unaligned reads, which see
# per-request bytes in nbdkit); writes of the same data succeed and of
# other data fail with EIO; trim and zero succeed on holes only; bad
# parameters are refused with one line naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

# Unaligned reads and the outcome of writes, trims and zeroes, printed
# so that the two servers' answers can be compared.
cat > "$tmpdir/odd" <<'EOF2'
#!/usr/bin/env bash
exec nbdsh -u "$1" -c '
import hashlib
size = h.get_size()
for off, n in [(0, 1), (1, 4095), (4095, 2), (126977, 8191), (131064, 16),
               (size - 5000, 5000), (size // 3, 100000)]:
    if off + n <= size:
        print(off, n, hashlib.sha256(h.pread(n, off)).hexdigest())
# Writes: the data just read back (same range) or something else.
for off, n in [(0, 65536), (126976, 8192), (1000, 3000)]:
    if off + n <= size:
        d = h.pread(n, off)
        for name, buf in [("same", d), ("flipped", bytes(b ^ 1 for b in d))]:
            try:
                h.pwrite(buf, off)
                print("write", off, n, name, "ok")
            except nbd.Error as e:
                print("write", off, n, name, e.errnum)
# Trim and zero everywhere in 1 MiB steps.
for off in range(0, min(size, 16 << 20), 1 << 20):
    n = min(1 << 20, size - off)
    for name, fn in [("zero", h.zero), ("trim", h.trim)]:
        try:
            fn(n, off)
            print(name, off, "ok")
        except nbd.Error as e:
            print(name, off, e.errnum)
'
EOF2
chmod +x "$tmpdir/odd"

compare sparse-random-default read sparse-random 64M seed=1
compare sparse-random-p30 read sparse-random size=64M seed=1 percent=30 \
  runlength=65536
compare sparse-random-content read sparse-random size=16M seed=7 \
  percent=50 runlength=1048576 random-content=true
compare sparse-random-p0 read sparse-random size=8M seed=3 percent=0
compare sparse-random-p100 read sparse-random size=64M seed=3 percent=100
compare sparse-random-frac read sparse-random size=32M seed=9 percent=2.5% \
  runlength=131072
compare sparse-random-short-runs read sparse-random size=8M seed=11 \
  percent=90 runlength=1000
compare sparse-random-odd-size read sparse-random size=1000001 seed=5 \
  percent=60 runlength=8192
compare sparse-random-nosize read sparse-random
compare sparse-random-odd-reads "$tmpdir/odd" sparse-random size=64M seed=1 \
  percent=30 runlength=65536
compare sparse-random-odd-content "$tmpdir/odd" sparse-random size=4M \
  seed=8 percent=70 runlength=16384 random-content=true

# nbdkit 1.32 documents size suffixes for runlength but refuses them
# ("trailing garbage"); ours accepts them as documented.
for rl in 1M 1048576; do
  t "$NBDKIT" -U - sparse-random 16M seed=6 percent=50 runlength=$rl \
    --run 'nbdinfo --map "$uri"' > "$tmpdir/map-$rl"
done
cmp -s "$tmpdir/map-1M" "$tmpdir/map-1048576" ||
  note_failure sparse-random-runlength-suffix "runlength=1M differs"

# A data block is never zero, and a seed gives the same bytes each run.
t "$NBDKIT" -U - sparse-random 16M seed=2 percent=100 --run 'nbdsh -u "$uri" -c "
for off in range(0, 16 << 20, 4096):
    assert h.pread(1, off) != b\"\\0\", off
"' || note_failure sparse-random-nonzero "a data block read as zero"

# A copy onto itself over several connections checks every write.
t "$NBDKIT" -U - sparse-random 64M seed=4 percent=40 runlength=256K \
  --run 'nbdcopy --connections=4 "$uri" "$uri"' ||
  note_failure sparse-random-self-copy "nbdcopy onto itself failed"

# Bad parameters: one line naming the parameter, exit 1.
for bad in percent=101 percent=-1 percent=abc percent=5x runlength=0 \
           runlength=abc seed=-1 seed=4294967296 seed=abc \
           random-content=maybe size=abc nosuch=1; do
  refuses "sparse-random.*${bad%%=*}" sparse-random 1M "$bad" ||
    note_failure "sparse-random-bad-$bad" \
      "not refused with one line naming ${bad%%=*}"
done

finish
