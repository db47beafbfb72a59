#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# One connection to a slow backend runs its requests side by side, as
# nbdkit(1) -t promises ("the number of outstanding requests that can be
# processed at once"), from the first request on, and a reply ready
# early is not held behind a slower one.  Each case runs under
# Debian's nbdkit and ours, and both must behave the same where nbdkit's
# answer does not depend on timing:
#  - qemu-io sends a write that the delay filter holds 2 s and then a
#    read it holds 1 s: the read completes first (a server that ran
#    them one at a time answered the write first, then the read at 3 s);
#  - (ours only: Debian's nbdkit answers these either way, depending on
#    which of its threads wins) a cache hit sent just before a miss that
#    waits 1 s is answered at once (not along with the miss), through
#    --filter=cache over a delayed plugin, and from an eval plugin whose
#    thread model serialises requests;
#  - 16 reads of 1 s through the delay filter, sent together, all
#    finish within 2.5 s (run one at a time they take 16 s; grown only
#    after reads had finished, 5 s).  The bound is generous: the point
#    is that the reads overlap, not how fast they go.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
requires_cmd qemu-io
[ -x /usr/bin/nbdkit ] || { echo "SKIP: Debian's nbdkit is not installed"; exit 77; }
# The reads race the watcher's ticks only by milliseconds against
# seconds, but a busy machine should not decide it.
tracing_lock

printf '%1024s' . > "$tmpdir/f.img"

cat > "$tmpdir/two.py" <<'PY'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
first, second = int(sys.argv[2]), int(sys.argv[3])
if len(sys.argv) > 4:                   # put the first block in the cache
    h.pwrite(b"a" * 4096, first)
t = time.monotonic()
done = {}
def completed(name):
    def cb(err):
        assert err.value == 0, err.value
        done[name] = time.monotonic() - t
        return 1
    return cb
b1, b2 = nbd.Buffer(512), nbd.Buffer(512)
h.aio_pread(b1, first, completion=completed("fast"))
h.aio_pread(b2, second, completion=completed("slow"))
while h.aio_in_flight() > 0:
    h.poll(-1)
print("fast %.3f slow %.3f" % (done["fast"], done["slow"]))
assert done["slow"] >= 1, "the slow read took %.3f s" % done["slow"]
assert done["fast"] < 0.5, \
    "the fast reply came at %.3f s, with the slow one" % done["fast"]
PY

cat > "$tmpdir/burst.py" <<'PY'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
t = time.monotonic()
bufs = [nbd.Buffer(512) for i in range(16)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
d = time.monotonic() - t
print("16 reads of 1 s: %.2f s" % d)
assert 1 <= d < 2.5, "16 reads of 1 s sent together took %.2f s" % d
PY

for srv in debian ours; do
  bin="$NBDKIT"
  [ $srv = debian ] && bin=/usr/bin/nbdkit
  echo "== $srv"

  t "$bin" -U - --filter=delay file "$tmpdir/f.img" wdelay=2 rdelay=1 \
    --run 'qemu-io -f raw -c "aio_write -P 2 512 512" -c "aio_read 0 512" \
             -c aio_flush "$nbd"' > "$tmpdir/qemu-io.$srv" 2>&1 ||
    { cat "$tmpdir/qemu-io.$srv"; fail "$srv: qemu-io failed"; }
  cat "$tmpdir/qemu-io.$srv"
  grep -E '^(read|wrote) ' "$tmpdir/qemu-io.$srv" | cut -d' ' -f1 |
    tr '\n' ' ' > "$tmpdir/order.$srv"
  [ "$(cat "$tmpdir/order.$srv")" = "read wrote " ] ||
    fail "$srv: the 1 s read did not complete before the 2 s write"

  # Under Debian's nbdkit these two depend on which of its threads
  # takes the request first (its cache filter's lock, the serialising
  # thread model's lock): a CI run saw its cache hit wait for the miss.
  # Ours answers the first request read first and sends its reply while
  # the second runs, every time.
  if [ $srv = ours ]; then
    t "$bin" -U - --filter=cache --filter=delay memory 4M rdelay=1 \
      --run "/usr/bin/python3 $tmpdir/two.py \"\$uri\" 0 $((1 << 20)) cache" ||
      fail "$srv: a cache hit waited for the miss behind it"

    t "$bin" -U - eval get_size='echo 2M' \
      pread='if [ $4 -ge 1048576 ]; then sleep 1; fi
             dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null' \
      --run "/usr/bin/python3 $tmpdir/two.py \"\$uri\" 0 $((1 << 20))" ||
      fail "$srv: under a serialising plugin a reply waited for the next read"
  fi

  t "$bin" -U - --filter=delay memory 1M rdelay=1 \
    --run "/usr/bin/python3 $tmpdir/burst.py \"\$uri\"" ||
    fail "$srv: 16 slow reads did not overlap"
done
