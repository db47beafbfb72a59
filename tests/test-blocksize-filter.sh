#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=blocksize: a plugin that refuses unaligned or oversized
# requests (Debian's blocksize-policy with blocksize-error-policy=error
# in front of the file plugin) serves any client request through it:
# random unaligned reads, writes and zeroes match a model of the disk;
# the export's size is rounded down and the filter advertises minimum
# 1; parallel unaligned writes to the same blocks from four connections
# lose nothing (the read-modify-write lock); nbdcopy copies in and out
# with 4K requests over four connections and minblock=64k; Debian's
# nbdkit gives the same bytes, map and outcomes; bad parameters are
# refused.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

policy="$debian_filterdir/nbdkit-blocksize-policy-filter.so"
requires test -f "$policy"
disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024 + 1000))
cp "$disk.orig" "$disk"
strict=(--filter=blocksize --filter="$policy" file "$disk"
        blocksize-error-policy=error blocksize-minimum=512
        blocksize-preferred=4096 blocksize-maximum=16384)

# What the plugin says it takes, and what the filter advertises.
start_server "${strict[@]}" minblock=4k maxdata=8k
t nbdinfo --json "$uri" > "$tmpdir/info"
# The maximum is the filter's 4294967295 (as nbdkit advertises it), not
# the plugin's 16384.
for kv in '"export-size": 4194304,' '"block_size_minimum": 1,' \
          '"block_size_preferred": 4096,' \
          '"block_size_maximum": 4294967295,'; do
  grep -Eq "$kv" "$tmpdir/info" || { cat "$tmpdir/info"; fail "nbdinfo: no $kv"; }
done

# Random requests against a model.
t nbdsh -u "$uri" -c - <<PY || fail "random requests through the filter"
import random
rnd = random.Random(16)
size = h.get_size()
model = bytearray(open("$disk", "rb").read()[:size])
for i in range(400):
    op = rnd.choice(["read", "write", "write", "zero", "zero-fua", "cache"])
    n = rnd.choice([1, 7, 511, 512, 4095, 4097, 9000, 20000, 70000])
    off = rnd.randrange(size - n)
    if op == "read":
        assert h.pread(n, off) == model[off:off + n], ("read", off, n)
    elif op == "write":
        data = rnd.randbytes(n)
        h.pwrite(data, off, rnd.choice([0, nbd.CMD_FLAG_FUA]))
        model[off:off + n] = data
    elif op.startswith("zero"):
        h.zero(n, off, nbd.CMD_FLAG_FUA if op == "zero-fua" else 0)
        model[off:off + n] = bytes(n)
    else:
        h.cache(n, off)
assert h.pread(size, 0) == model, "final contents differ from the model"
h.flush()
assert open("$disk", "rb").read()[:size] == model, "file differs from the model"
# A fast zero that needs a read-modify-write is refused, an aligned one
# is not (the file plugin zeroes fast).
try:
    h.zero(100, 1000, nbd.CMD_FLAG_FAST_ZERO)
except nbd.Error as e:
    assert e.errno == "ENOTSUP", e
else:
    raise AssertionError("unaligned fast zero succeeded")
h.zero(8192, 8192, nbd.CMD_FLAG_FAST_ZERO)
# Trims of partial blocks do nothing; whole blocks inside are trimmed.
h.pwrite(b"k" * 12288, 65536)
h.trim(100, 65536 + 5)
assert h.pread(12288, 65536) == b"k" * 12288
PY
stop_server

# Four connections write single bytes, interleaved, into the same
# blocks, 64 requests in flight each: every byte must survive.
cp "$disk.orig" "$disk"
start_server "${strict[@]}" minblock=4k
t nbdsh -c - <<PY || fail "parallel unaligned writes lost data"
conns = []
for c in range(4):
    x = nbd.NBD()
    x.connect_unix("$sock")
    conns.append(x)
span = 65536
for i in range(span):
    c = conns[i % 4]
    while c.aio_in_flight() >= 64:
        c.poll(-1)
    c.aio_pwrite(bytes([i % 251 + 1]), i)
    for x in conns:
        if x.aio_in_flight():
            x.aio_peek_command_completed()
        x.poll(0)
for x in conns:
    while x.aio_in_flight():
        x.poll(-1)
        x.aio_peek_command_completed()
got = conns[0].pread(span, 0)
want = bytes(i % 251 + 1 for i in range(span))
bad = [i for i in range(span) if got[i] != want[i]]
assert not bad, "%d bytes lost, first at %d" % (len(bad), bad[0])
PY
stop_server

# nbdcopy in and out through the filter, four connections with many
# 4K requests in flight, each write a read-modify-write of a 64K block.
# (This round trip passes without the lock too: the interleaved writes
# above are what prove the lock.)
head -c 4M "$disk.orig" > "$tmpdir/src.img"
truncate -s 4M "$disk"
start_server --filter=blocksize file "$disk" minblock=64k
t nbdcopy --connections=4 --requests=16 --request-size=4096 \
  "$tmpdir/src.img" "$uri" || fail "nbdcopy into the filter failed"
t nbdcopy --connections=4 --requests=16 --request-size=4096 \
  "$uri" "$tmpdir/out.img" || fail "nbdcopy out of the filter failed"
stop_server
cmp "$tmpdir/src.img" "$disk" ||
  fail "nbdcopy through the filter wrote the wrong bytes"
cmp "$tmpdir/src.img" "$tmpdir/out.img" ||
  fail "nbdcopy out of the filter read the wrong bytes"

# Same command, same bytes, same map as Debian's nbdkit.
state_files=("$disk")
compare_own "blocksize read" read --filter=blocksize file "$disk" \
  minblock=4k maxdata=64k maxlen=128k
compare_own "blocksize write" write --filter=blocksize file "$disk" \
  minblock=4k maxdata=32k
compare_own "blocksize strict write" write "${strict[@]}" minblock=4k maxdata=8k
compare_own "blocksize 512 read" read "${strict[@]}"
cat > "$tmpdir/unaligned" <<'EOF'
#!/bin/sh
nbdsh -u "$1" -c '
for off, n in [(1, 1), (4095, 2), (100, 70000), (8191, 4097)]:
    h.pwrite(b"u" * n, off)
    h.zero(n // 2 + 1, off + 3)
    h.trim(n, off + 1000)
    print(off, n, h.pread(n + 10, off).hex()[:64])
'
EOF
cat > "$tmpdir/fast-zero" <<'EOF'
#!/bin/sh
nbdsh -u "$1" -c '
for n, off in [(10, 5), (4096, 4096), (8192, 100)]:
    try:
        h.zero(n, off, nbd.CMD_FLAG_FAST_ZERO)
        print("fast zero", n, off, "ok")
    except nbd.Error as e:
        print("fast zero", n, off, e.errno)
'
EOF
chmod +x "$tmpdir/unaligned" "$tmpdir/fast-zero"
compare_own "blocksize unaligned" "$tmpdir/unaligned" \
  --filter=blocksize file "$disk" minblock=4k maxdata=8k maxlen=8k
# Debian's file plugin has no fast zero on a regular file; its memory
# plugin has.
compare_own "blocksize fast zero" "$tmpdir/fast-zero" \
  --filter=blocksize memory 1M minblock=4k maxdata=8k maxlen=8k
finish

# Bad parameters: one line naming the parameter, exit 1.
for bad in minblock=3 minblock=128k minblock=0 minblock=x maxdata=0 \
           maxlen=5G "minblock=512 maxdata=1000" "minblock=4k maxlen=6k"; do
  status=0
  # shellcheck disable=SC2086
  "$NBDKIT" --filter=blocksize null 1M $bad --run true \
            > "$tmpdir/msg" 2>&1 || status=$?
  key="${bad##* }"
  key="${key%%=*}"
  [ "$status" -eq 1 ] && [ "$(wc -l < "$tmpdir/msg")" -eq 1 ] &&
    grep -q "$key" "$tmpdir/msg" ||
    { cat "$tmpdir/msg"; fail "$bad: exit $status, want 1 and one line naming $key"; }
done
