#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=xz serves the uncompressed bytes of an .xz file read-only:
# the same size, flags, map and bytes as Debian's nbdkit with its own xz
# filter, for a file of many blocks, a file of one block and a file of
# two concatenated streams; random reads across block boundaries (with
# a one-block cache, so blocks are evicted and decompressed again) give
# the original bytes; nbdcopy and qemu-img compare agree with the
# original; writes are refused; xz-max-block refuses a file with a
# larger block; bad parameter values exit 1 naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$srcdir/debian-filters.sh"
requires_cmd xz qemu-img

# 3 MiB + 1000 bytes: incompressible data, zeros, and a repeating
# pattern, so both stored and compressed LZMA2 chunks occur.
data="$tmpdir/data.img"
/usr/bin/python3 - "$data" <<'PY'
import random, sys
r = random.Random(16)
d = r.randbytes(1 << 20)
d += bytes(1 << 20)
d += b"".join(b"%08d" % i for i in range((1 << 20) // 8))
d += r.randbytes(1000)
open(sys.argv[1], "wb").write(d)
PY
size=$(stat -c %s "$data")

many="$tmpdir/many.xz"
one="$tmpdir/one.xz"
multi="$tmpdir/multi.xz"
padded="$tmpdir/padded.xz"
xz -c --block-size=65536 "$data" > "$many"
xz -c "$data" > "$one"
# Two streams with different checks; then the same with stream padding
# (zero bytes, a multiple of 4) at the end.
head -c 1000000 "$data" | xz -c --block-size=100000 > "$multi"
tail -c +1000001 "$data" | xz -c --check=crc32 >> "$multi"
{ cat "$multi"; head -c 8 /dev/zero; } > "$padded"
xz -t "$padded" || fail "xz does not accept $padded"
blocks=$(xz --robot --list "$many" | awk '$1 == "file" { print $3 }')
[ "$blocks" -eq $(( (size + 65535) / 65536 )) ] ||
  fail "$many has $blocks blocks"
[ "$(xz --robot --list "$one" | awk '$1 == "file" { print $3 }')" -eq 1 ] ||
  fail "$one is not one block"

# --- Same command, same answers as Debian's nbdkit -------------------------
compare_own xz-many read --filter=xz file "$many"
expect_in xz-many "$ours" "^export-size=$size is_read_only=True"
compare_own xz-one read --filter=xz file "$one"
compare_own xz-multi read --filter=xz file "$multi"
# Debian's nbdkit 1.32 misplaces the blocks of a file that ends in
# stream padding ("invalid block header", then an assertion kills it):
# the padded file is checked against the original bytes instead.
t "$NBDKIT" -U - --filter=xz file "$padded" \
  --run 'nbdcopy "$uri" -' | cmp - "$data" || fail "padded file differs"
compare_own xz-depth read --filter=xz file "$many" xz-max-depth=1 \
  xz-max-block=64K
want="$(sha256sum < "$data")"
expect_in xz-many-bytes "$tmpdir/out/xz-many.ours" "^copy-all ${want%% *}"
expect_in xz-multi-bytes "$tmpdir/out/xz-multi.ours" "^copy ${want%% *}"

# --- Random reads across block boundaries ---------------------------------
for f in "$many" "$padded" "$one"; do
  start_server --filter=xz file "$f" xz-max-depth=1
  t nbdsh -u "$uri" -c - <<PY
import random
data = open("$data", "rb").read()
assert h.get_size() == len(data), h.get_size()
assert h.is_read_only()
r = random.Random(7)
# Ranges that straddle one or more 64K (and 100000-byte) boundaries,
# then random ones; depth 1 makes every other block a miss.
cases = [(65536 - 10, 20), (65536 * 3 - 1, 65536 * 2 + 2),
         (99990, 20), (999990, 20), (0, len(data)), (len(data) - 1, 1)]
for _ in range(150):
    off = r.randrange(len(data))
    cases.append((off, r.randint(1, min(300000, len(data) - off))))
for off, n in cases:
    assert h.pread(n, off) == data[off:off + n], (off, n)
PY
  stop_server
done

# --- nbdcopy (several connections) and qemu-img compare -------------------
start_server --filter=xz file "$many" xz-max-depth=2
t nbdcopy --connections=4 --requests=16 "$uri" "$tmpdir/copy.img"
cmp "$data" "$tmpdir/copy.img" || fail "nbdcopy copy differs"
t qemu-img compare -f raw -F raw "$data" "$uri" ||
  fail "qemu-img compare found a difference"

# --- Writes are refused ---------------------------------------------------
t nbdsh -u "$uri" -c - <<'PY'
h.set_strict_mode(0)
for fn in (lambda: h.pwrite(b"x" * 512, 0), lambda: h.zero(512, 0),
           lambda: h.trim(512, 0)):
    try:
        fn()
    except nbd.Error as ex:
        pass
    else:
        raise AssertionError("a write succeeded through the xz filter")
PY
stop_server

# --- xz-max-block ---------------------------------------------------------
"$NBDKIT" -U - --filter=xz file "$many" xz-max-block=65535 \
  --run 'nbdinfo "$uri"' > "$tmpdir/maxblock.out" 2>&1 &&
  fail "a 64K block was accepted with xz-max-block=65535"
grep -q "xz-max-block.*65536" "$tmpdir/maxblock.out" ||
  fail "xz-max-block refusal does not say why: $(cat "$tmpdir/maxblock.out")"
t "$NBDKIT" -U - --filter=xz file "$many" xz-max-block=64K \
  --run 'nbdinfo --size "$uri"' | grep -qx "$size" ||
  fail "xz-max-block=64K refused 64K blocks"

# --- Bad parameter values -------------------------------------------------
for arg in xz-max-depth=0 xz-max-depth=-1 xz-max-depth=x xz-max-block=x \
           xz-max-block=-1; do
  refuses "xz.*${arg%%=*}" --filter=xz file "$many" "$arg" ||
    fail "$arg: not refused with one line naming the parameter"
done

finish
