#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin through io_uring and O_DIRECT gives the client the
# same bytes as the synchronous path and as Debian's nbdkit.  One
# script of random requests (a fixed seed: writes of random lengths at
# random offsets, most of them not aligned to any sector, some with
# FUA, 64 in flight at a time on distinct ranges, flushes, reads of
# random ranges including the file's unaligned tail) runs against a
# fresh copy of the same file served by:
#
#   ours direct=true aio=io_uring
#   ours aio=io_uring (the page cache)
#   ours direct=true aio=io_uring -D nbdkit.async=0 (the synchronous path)
#   ours direct=true aio=threads
#   ours, as by default
#   Debian's /usr/bin/nbdkit file
#
# and every run must read the same bytes and leave the same file.
source "$(dirname "$0")/functions.sh"
requires_cmd sha256sum
requires test -x /usr/bin/nbdkit
source "$(dirname "$0")/file-io-uring-setup.sh"

# 8 MiB and 1000 bytes: the last sector is partial.
size=$(( 8 * 1048576 + 1000 ))
head -c "$size" /dev/urandom > "$dir/orig"

cat > "$tmpdir/script.py" <<'PY'
import hashlib, nbd, random, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
rng = random.Random(30)
reads = hashlib.sha256()
slot = 64 * 1024
nslots = size // slot

def wait_all(cookies):
    for c in cookies:
        while not h.aio_command_completed(c):
            h.poll(-1)

for batch in range(6):
    # Writes: distinct slots, so their order in the server does not
    # matter.
    cookies = []
    for s in rng.sample(range(nslots), 64):
        off = s * slot + rng.randrange(slot - 1)
        n = rng.randrange(1, min(slot * 2, size - off) + 1)
        n = min(n, (s + 1) * slot - off)
        if rng.random() < 0.3:
            off -= off % 4096           # some aligned ones
            n = max(4096, n - n % 4096)
        data = rng.randbytes(n)
        flags = nbd.CMD_FLAG_FUA if rng.random() < 0.2 else 0
        cookies.append(h.aio_pwrite(data, off, flags=flags))
    wait_all(cookies)
    if batch % 2:
        h.flush()
    # Reads: random ranges anywhere, the tail too, 64 in flight.
    bufs = []
    for i in range(64):
        if i == 0:
            off = size - rng.randrange(1, 5000)
        else:
            off = rng.randrange(size - 1)
        n = rng.randrange(1, min(1 << 20, size - off) + 1)
        if rng.random() < 0.3:
            off -= off % 4096
            n = min(max(4096, n - n % 4096), size - off)
        b = nbd.Buffer(n)
        bufs.append((b, h.aio_pread(b, off)))
    wait_all([c for b, c in bufs])
    for b, c in bufs:
        reads.update(b.to_bytearray())
h.flush()
# The whole export, in 1 MiB reads.
for off in range(0, size, 1 << 20):
    reads.update(h.pread(min(1 << 20, size - off), off))
h.shutdown()
print(reads.hexdigest())
PY

# run NAME "NBDKIT OPTIONS" ARGS...: the script against a copy of the
# file; prints "NAME <hash of the reads> <hash of the file>".
run ()
{
  local name="$1" server="$2" copy="$dir/copy" got
  shift 2
  cp "$dir/orig" "$copy"
  got="$(t $server -U - file "$copy" "$@" \
           --run '/usr/bin/python3 "'"$tmpdir"'/script.py" "$uri"')" ||
    fail "$name: the script failed"
  echo "$name $got $(sha256sum < "$copy" | cut -d' ' -f1)"
  rm -f "$copy"
}

{
  run direct-io_uring "$NBDKIT -v" direct=true aio=io_uring
  run io_uring "$NBDKIT" aio=io_uring
  run direct-sync "$NBDKIT -D nbdkit.async=0" direct=true aio=io_uring
  run direct-threads "$NBDKIT" direct=true aio=threads
  run default "$NBDKIT"
  run debian /usr/bin/nbdkit
} > "$tmpdir/results" 2> "$tmpdir/log"
cat "$tmpdir/results"
# The first really had O_DIRECT and io_uring.
grep -q 'O_DIRECT, aio=io_uring' "$tmpdir/log" ||
  fail "direct=true did not open with O_DIRECT and io_uring"
[ "$(cut -d' ' -f2- "$tmpdir/results" | sort -u | wc -l)" -eq 1 ] ||
  fail "the servers did not all give the same bytes"
