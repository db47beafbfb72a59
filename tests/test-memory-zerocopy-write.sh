#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Writes of more than 64 KiB up to 1 MiB, without FUA, are received
# straight into pages the memory plugin lends, and stored when the
# request runs (zero-copy writes): new pages over holes, replacing
# pages over stored ones it covers whole; the rest (smaller, larger,
# FUA, over a stored page covered in part, through a filter) go the
# copying way.  Against a model kept in Python, every write must leave
# the same bytes the plain path would: over never-written holes, over
# written pages, over trimmed and zeroed pages, unaligned at both ends,
# below, at and past the 1 MiB limit, with FUA mixed in, 64 at a time
# in flight, with structured replies and without, and through a
# filter.  All-zero data written over a hole must not allocate pages:
# block status still says hole+zero there, while one non-zero byte
# does make its page data (so the check can fail).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh psktool certtool

cat > "$tmpdir/check.py" <<'PY'
import random
KiB = 1024
MiB = 1024 * KiB
PAGE = 4096
size = h.get_size()
assert size == 32 * MiB, size
model = bytearray(size)
rng = random.Random(17)
assert h.can_fua()
FUA = nbd.CMD_FLAG_FUA
meta = h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
assert meta == want_meta, (meta, want_meta)

# The top 4 MiB is only ever written here with data that never turns a
# non-zero page back to zeroes, so the state of each of its pages is
# known: data if it holds a non-zero byte, hole+zero otherwise.  The
# rest (R bytes) gets everything else.
H = size - 4 * MiB
R = H

def write(data, off, flags=0):
    h.pwrite(data, off, flags)
    model[off:off + len(data)] = data

def check(off, n, what=""):
    """Read [OFF, OFF + N) widened by a page each side; compare."""
    lo, hi = max(0, off - PAGE), min(size, off + n + PAGE)
    got = h.pread(hi - lo, lo)
    if got != model[lo:hi]:
        bad = next(i for i in range(hi - lo) if got[i] != model[lo + i])
        raise AssertionError("%s: write of %d at %d: byte %d differs "
                             "(got %d, want %d)" % (what, n, off, lo + bad,
                                                    got[bad], model[lo + bad]))

def runs(off, n):
    """base:allocation over [OFF, OFF + N) as merged [offset, length,
    state] runs, clipped to the range."""
    out = []
    def cb(metacontext, offset, entries, err):
        assert metacontext == nbd.CONTEXT_BASE_ALLOCATION, metacontext
        pos = offset
        for i in range(0, len(entries), 2):
            length, flags = entries[i], entries[i + 1]
            assert length > 0, entries
            s, e = max(pos, off), min(pos + length, off + n)
            if s < e:
                if out and out[-1][2] == flags and sum(out[-1][:2]) == s:
                    out[-1][1] += e - s
                else:
                    out.append([s, e - s, flags])
            pos += length
        return 0
    pos = off
    while pos < off + n:
        h.block_status(off + n - pos, pos, cb)
        assert out and sum(out[-1][:2]) > pos, "no progress at %d" % pos
        pos = sum(out[-1][:2])
    return out

def want_runs(off, n):
    """What runs() must say over page-aligned [OFF, OFF + N) in the top
    4 MiB: data (0) for pages with a non-zero byte, else hole+zero (3)."""
    out = []
    for p in range(off, off + n, PAGE):
        st = 0 if any(model[p:p + PAGE]) else 3
        if out and out[-1][2] == st:
            out[-1][1] += PAGE
        else:
            out.append([p, PAGE, st])
    return out

def check_alloc(off, n, what):
    if meta:
        got, want = runs(off, n), want_runs(off, n)
        assert got == want, "%s: block status %r, expected %r" % (what, got,
                                                                   want)

SIZES = [1, 511, 4095, 4096, 4097, 65536 + 3, 262144, MiB - 1, MiB,
         MiB + 4096]

def payload(n, kind):
    if kind == "random":
        return rng.randbytes(n)
    if kind == "zero":
        return bytes(n)
    if kind == "byte":
        return bytes([rng.randrange(1, 256)]) * n
    # "sparse": zeroes with a few random bytes, some pages all zero.
    b = bytearray(n)
    for _ in range(rng.randrange(1, 8)):
        i = rng.randrange(n)
        b[i] = rng.randrange(1, 256)
    return bytes(b)

# 1. All-zero writes over never-written holes allocate nothing.
assert h.pread(4 * MiB, H) == bytes(4 * MiB)
check_alloc(H, 4 * MiB, "before any write")
write(bytes(256 * KiB), H)                       # aligned, 256 KiB
check(H, 256 * KiB, "zero over hole")
if meta:
    assert runs(H, 256 * KiB) == [[H, 256 * KiB, 3]], runs(H, 256 * KiB)
# Unaligned all-zero writes of every size, with and without FUA.
for i, n in enumerate(SIZES):
    off = H + 256 * KiB + rng.randrange(0, 3 * MiB - 256 * KiB - n)
    write(bytes(n), off, FUA if i % 3 == 2 else 0)
    check(off, n, "zero over hole")
check_alloc(H, 4 * MiB, "all-zero writes over holes")
# One non-zero byte in the last page of the 256 KiB makes that page
# data, and only that page: block status does see allocation.
write(b"\x01", H + 256 * KiB - 1)
check(H + 256 * KiB - 1, 1, "one byte")
if meta:
    got = runs(H, 256 * KiB)
    assert got == [[H, 252 * KiB, 3], [H + 252 * KiB, PAGE, 0]], got
check_alloc(H, 4 * MiB, "one non-zero byte")
# A 1 MiB write of zeroes with one non-zero page (page 5) allocates that
# page only; so does an unaligned 64 KiB + 3 with bytes in one page.
M = H + 3 * MiB
buf = bytearray(MiB)
buf[5 * PAGE + 100:5 * PAGE + 200] = rng.randbytes(100)
write(bytes(buf), M)
check(M, MiB, "mostly zero")
if meta:
    got = runs(M, MiB)
    assert got == [[M, 5 * PAGE, 3], [M + 5 * PAGE, PAGE, 0],
                   [M + 6 * PAGE, MiB - 6 * PAGE, 3]], got
buf = bytearray(65536 + 3)
buf[3 * PAGE + 7] = 0x42
write(bytes(buf), H + 2 * MiB + 1001)
check(H + 2 * MiB + 1001, len(buf), "mostly zero, unaligned")
check_alloc(H, 4 * MiB, "writes with some zero pages")

# 2. Non-zero writes of every size over never-written holes, unaligned.
pos = 0
for n in SIZES:
    pos += rng.randrange(1, PAGE)
    write(payload(n, "random"), pos)
    check(pos, n, "over a hole")
    pos += n
assert pos < R // 2

# 3. Trimmed and zeroed pages are holes again; all-zero writes over
# them stay holes, data over them reads back.
for i, how in enumerate((h.trim, h.zero)):
    T = R // 2 + i * 2 * MiB
    write(payload(MiB, "random"), T)
    how(MiB, T)
    model[T:T + MiB] = bytes(MiB)
    check(T, MiB, "after trim/zero")
    if meta:
        assert runs(T, MiB) == [[T, MiB, 3]], runs(T, MiB)
    write(bytes(MiB - 1), T + 1)
    write(bytes(4097), T + 8191, FUA)
    check(T, MiB, "zero over trimmed")
    if meta:
        assert runs(T, MiB) == [[T, MiB, 3]], runs(T, MiB)
    write(payload(65536 + 3, "random"), T + 4095)
    check(T + 4095, 65536 + 3, "data over trimmed")

# 4. Scattered writes, trims and zeroes, then writes of every size over
# trimmed or zeroed ranges, over just-written pages (shifted so both
# ends are partial pages), and anywhere; a third of them with FUA.
for i in range(40):
    n = rng.randrange(1, 40) * PAGE - rng.randrange(0, 512)
    off = rng.randrange(0, R - n)
    write(payload(n, "random"), off)
for i in range(10):
    n = rng.randrange(1, 60) * PAGE
    off = rng.randrange(0, R - n) & ~(PAGE - 1)
    (h.trim if i % 2 else h.zero)(n, off)
    model[off:off + n] = bytes(n)
KINDS = ["random", "random", "zero", "byte", "sparse"]
k = 0
for n in SIZES:
    for rep in range(3):
        k += 1
        flags = FUA if k % 3 == 0 else 0
        off = rng.randrange(PAGE, R - n - 2 * PAGE)
        # Over trimmed or zeroed pages.
        lo = (off - PAGE) & ~(PAGE - 1)
        hi = (off + n + 2 * PAGE) & ~(PAGE - 1)
        (h.trim if rep % 2 else h.zero)(hi - lo, lo)
        model[lo:hi] = bytes(hi - lo)
        write(payload(n, KINDS[k % len(KINDS)]), off, flags)
        check(off, n, "over trimmed")
        # Over the pages just written, shifted.
        off2 = min(R - n, off + rng.randrange(1, 2 * PAGE))
        write(payload(n, KINDS[(k + 1) % len(KINDS)]), off2, flags ^ FUA)
        check(off2, n, "over written")
        # Zeroes over the data just written: reads back as zeroes.
        write(bytes(n), off2)
        check(off2, n, "zero over data")
        write(payload(n, "random"), off2)
        check(off2, n, "data over zeroes")
        # Anywhere.
        off3 = rng.randrange(0, R - n)
        write(payload(n, KINDS[(k + 2) % len(KINDS)]), off3, flags)
        check(off3, n, "anywhere")

# 5. 64 writes in flight at once, to disjoint ranges at random unaligned
# offsets, sizes 64 KiB + a bit to 1 MiB + 4 KiB, some with FUA, some
# all zero.
sizes = ([MiB] * 8 + [MiB - 1] * 8 + [MiB + 4096] * 2 +
         [262144 + rng.randrange(0, PAGE) for _ in range(16)] +
         [65536 + rng.randrange(0, PAGE) for _ in range(30)])
assert len(sizes) == 64
rng.shuffle(sizes)
slack = R - sum(sizes)
assert slack > 64 * PAGE
pos = 0
inflight = []
for i, n in enumerate(sizes):
    pos += rng.randrange(0, slack // 64)
    data = payload(n, "zero" if i % 11 == 5 else "random")
    buf = nbd.Buffer.from_bytearray(bytearray(data))
    cookie = h.aio_pwrite(buf, pos, flags=FUA if i % 5 == 0 else 0)
    inflight.append((cookie, buf))
    model[pos:pos + n] = data
    pos += n
assert pos <= R
assert h.aio_in_flight() > 0
while h.aio_in_flight() > 0:
    h.poll(-1)
for cookie, buf in inflight:
    assert h.aio_command_completed(cookie)

# The whole disk, in 1 MiB reads; the top 4 MiB's allocation again.
for off in range(0, size, MiB):
    got = h.pread(MiB, off)
    if got != model[off:off + MiB]:
        bad = next(i for i in range(MiB) if got[i] != model[off + i])
        raise AssertionError("final compare: byte %d differs" % (off + bad))
check_alloc(H, 4 * MiB, "at the end")
PY

for sr in True False; do
  t "$NBDKIT" -U - memory 32M --run "nbdsh \
    -c 'h.set_request_structured_replies($sr)' \
    -c 'h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)' \
    -c \"h.connect_uri('\$uri')\" \
    -c 'assert h.get_structured_replies_negotiated() == $sr' \
    -c 'want_meta = $sr' \
    -c \"exec(open('$tmpdir/check.py').read())\"" ||
    fail "writes differ from the model (structured replies: $sr)"
done
t "$NBDKIT" -U - --filter=offset memory 36M offset=4M range=32M \
  --run "nbdsh --base-allocation -u \"\$uri\" -c 'want_meta = True' \
    -c \"exec(open('$tmpdir/check.py').read())\"" ||
  fail "writes through a filter differ from the model"

# Over TLS the payload is decrypted straight into the lent pages.
assert_tls_build
t "$srcdir/make-tls-files.sh" "$tmpdir/tls"
t "$NBDKIT" -U - --tls=require --tls-psk="$tmpdir/tls/keys.psk" memory 32M \
  --run "nbdsh --base-allocation -c 'h.set_uri_allow_local_file(True)' \
    -c \"h.connect_uri('\$uri')\" -c 'want_meta = True' \
    -c 'assert h.get_tls_negotiated()' \
    -c \"exec(open('$tmpdir/check.py').read())\"" ||
  fail "writes over TLS differ from the model"
