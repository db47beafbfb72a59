#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=evil, against the plugin's own bytes: stuck-bits changes
# about half of P of the bits (the other half are stuck at the value
# they had), the same ones for any request size and alignment and for
# the same seed, others for another seed, and a subset of them with
# evil-stuck-probability; stuck-wires hits the same positions of every
# read wherever it lands; cosmic-rays flips about P of the bits, anew
# at each read; P=0 changes nothing; writes reach the plugin intact.
# Bad values are refused.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

disk="$tmpdir/disk"
truncate -s 4M "$disk"
export DISK="$disk"

# evil_run ARGS... (stdin: python): nbdsh on the evil filter over the
# file, with helpers: good() the file's bytes, diff(a, b) the bits that
# differ as an int, bits(x) how many.
evil_run ()
{
  { cat <<'PY'
import os
def good(off=0, n=4 << 20):
    with open(os.environ["DISK"], "rb") as f:
        f.seek(off)
        return f.read(n)
def diff(a, b):
    return int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
def bits(x):
    return bin(x).count("1")
def read_all(step=1 << 20):
    return b"".join(h.pread(step, o) for o in range(0, 4 << 20, step))
PY
    cat; } > "$tmpdir/script.py"
  t "$NBDKIT" -U - --filter=evil file "$disk" "$@" \
    --run 'nbdsh -u "$uri" -c "exec(open(\"'"$tmpdir"'/script.py\").read())"'
}

# --- Writes are untouched; stuck bits ---------------------------------------
evil_run evil-probability=1e-3 evil-seed=7 <<'PY'
import random
data = random.Random(1).randbytes(4 << 20)
for o in range(0, 4 << 20, 1 << 20):
    h.pwrite(data[o:o + (1 << 20)], o)
assert good() == data, "the writes did not reach the file intact"
bad = read_all()
n = bits(diff(bad, data))
# 1e-3 of 32 Mbit are stuck, half of them at the value they had.
assert 14000 < n < 19500, n
# The same bits whatever the reads.
assert read_all(65536) == bad
for off, size in ((3, 1000), (777777, 4097), ((2 << 20) + 5, 123457),
                  ((4 << 20) - 1, 1)):
    assert h.pread(size, off) == bad[off:off + size], (off, size)
open(os.environ["DISK"] + ".bad7", "wb").write(bad)
PY
evil_run evil=stuck-bits evil-probability=1e-3 evil-seed=7 \
  evil-stuck-probability=50% <<'PY'
data = good()
stuck = diff(open(os.environ["DISK"] + ".bad7", "rb").read(), data)
a = diff(read_all(), data)
b = diff(read_all(), data)
assert a & ~stuck == 0 and b & ~stuck == 0, "bits outside the stuck ones"
assert 0.4 < bits(a) / bits(stuck) < 0.6, (bits(a), bits(stuck))
assert a != b, "stuck bits showed the same way twice"
PY
evil_run evil-probability=1:1000 evil-seed=8 <<'PY'
bad7 = open(os.environ["DISK"] + ".bad7", "rb").read()
bad8 = read_all()
data = good()
both = diff(bad7, data) & diff(bad8, data)
# Independent draws: few bits in common.
assert bits(both) < bits(diff(bad8, data)) // 20, bits(both)
PY

# --- Stuck wires --------------------------------------------------------------
truncate -s 0 "$disk"; truncate -s 4M "$disk"
evil_run evil=stuck-wires evil-probability=0.1% evil-seed=3 <<'PY'
h.pwrite(b"\xff" * 65536, 2 << 20)
z = h.pread(65536, 0)
assert h.pread(65536, 1 << 20) == z, "not the same wires at another offset"
assert h.pread(1000, 12345) == z[:1000], "positions not from the read's start"
f = h.pread(65536, 2 << 20)
high = diff(z, bytes(65536))         # stuck at 1
low = diff(f, b"\xff" * 65536)       # stuck at 0
assert high & low == 0
assert 400 < bits(high | low) < 650, bits(high | low)
assert bits(high) > 100 and bits(low) > 100
PY

# --- Cosmic rays; probability 0 ----------------------------------------------
evil_run evil=cosmic-rays evil-probability=1e-3 <<'PY'
a = h.pread(1 << 20, 0)
b = h.pread(1 << 20, 0)
zero = bytes(1 << 20)
assert 7500 < bits(diff(a, zero)) < 9300, bits(diff(a, zero))
assert a != b, "cosmic rays struck the same bits twice"
assert bits(diff(a, zero) & diff(b, zero)) < 100
PY
for m in cosmic-rays stuck-bits stuck-wires; do
  evil_run evil=$m evil-probability=0 <<'PY'
assert read_all() == good()
PY
done

for bad in evil=warm evil-probability=2 evil-probability=-1 \
           evil-probability=x evil-stuck-probability=101% evil-seed=-1; do
  refuses "${bad%%=*}" --filter=evil memory 1M "$bad" ||
    fail "$bad was accepted"
done
