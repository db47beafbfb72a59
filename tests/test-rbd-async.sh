#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's asynchronous path (nbdkit-async(3)) gives the client
# the bytes, flags and errors of its synchronous path
# (-D nbdkit.async=0):
#  - random data copied in with 64 requests in flight reads back the
#    same through both paths and through "rbd export";
#  - one script of writes (FUA or not), trims, zeroes (may-trim,
#    NO_HOLE, a refused fast zero) and flushes, run on each path against
#    an image of its own, leaves both images with the same bytes and the
#    same allocation ("rbd diff"), and sees the same answers.
# Would catch: a buffer completed before librbd filled it, wrong offsets
# or lengths in the asynchronous calls, a FUA flush or may-trim lost, a
# fast zero taken, an errno mapped differently.  (Debian's nbdkit has
# no rbd plugin to compare with.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh cmp
source "$srcdir/rbd-functions.sh"

sync=(-D nbdkit.async=0)

# 21 MiB: six 4 MiB objects, the last one partial.
img=$(new_image bytes 21M)
head -c 21M /dev/urandom > "$tmpdir/src"
t "$NBDKIT" -U - rbd "${rbd_args[@]}" image="$img" \
  --run 'nbdcopy --requests=64 --request-size=65536 "'"$tmpdir"'/src" "$uri" &&
         nbdcopy --requests=64 "$uri" "'"$tmpdir"'/async.out"' ||
  fail "nbdcopy through the asynchronous path failed"
t "$NBDKIT" "${sync[@]}" -U - rbd "${rbd_args[@]}" image="$img" \
  --run 'nbdcopy --requests=64 "$uri" "'"$tmpdir"'/sync.out"' ||
  fail "nbdcopy through the synchronous path failed"
rbdc export --no-progress "$RBD_POOL/$img" "$tmpdir/export.out" ||
  fail "rbd export failed"
md5sum "$tmpdir"/{src,async.out,sync.out,export.out}
cmp "$tmpdir/src" "$tmpdir/export.out" ||
  fail "the cluster does not hold what the asynchronous path wrote"
cmp "$tmpdir/src" "$tmpdir/async.out" ||
  fail "the asynchronous path reads back other bytes"
cmp "$tmpdir/src" "$tmpdir/sync.out" ||
  fail "the synchronous path reads other bytes than the asynchronous one wrote"

# The same requests on each path, against an image each.
cat > "$tmpdir/ops.py" <<'PY'
import nbd, sys
M = 1024 * 1024
h = nbd.NBD()
h.connect_uri(sys.argv[1])
def pattern(n, seed):
    return bytes((i * 7 + seed) % 251 for i in range(n))
def run(what, op):
    try:
        op()
        print(what, "ok")
    except nbd.Error as e:
        print(what, e.errno)
run("write", lambda: h.pwrite(pattern(3 * M, 1), 0))
run("write fua", lambda: h.pwrite(pattern(M + 512, 2), 4 * M - 512,
                                  nbd.CMD_FLAG_FUA))
run("write 8M", lambda: h.pwrite(pattern(4 * M, 3), 8 * M))
run("trim fua", lambda: h.trim(4 * M, 8 * M, nbd.CMD_FLAG_FUA))
run("zero", lambda: h.zero(M, M))
run("zero no-hole", lambda: h.zero(M, 4 * M, nbd.CMD_FLAG_NO_HOLE))
run("zero no-hole fua", lambda: h.zero(4096, 2 * M + 100,
                                       nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA))
run("fast zero", lambda: h.zero(M, 0, nbd.CMD_FLAG_FAST_ZERO))
run("fast zero no-hole", lambda: h.zero(
    M, 2 * M, nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_NO_HOLE))
run("flush", lambda: h.flush())
# Many in flight at once, overlapping neither each other nor the rest.
bufs = []
for i in range(64):
    bufs.append(pattern(4096, i))
    h.aio_pwrite(bufs[-1], 12 * M + i * 8192,
                 flags=nbd.CMD_FLAG_FUA if i % 4 == 0 else 0)
while h.aio_in_flight() > 0:
    h.poll(-1)
data = h.pread(16 * M, 0)
print("read", len(data))
open(sys.argv[2], "wb").write(data)
h.shutdown()
PY
for path in async sync; do
  im=$(new_image "$path" 16M)
  flags=()
  [ $path = sync ] && flags=("${sync[@]}")
  t "$NBDKIT" "${flags[@]}" -U - rbd "${rbd_args[@]}" image="$im" \
    --run 'python3 "'"$tmpdir"'/ops.py" "$uri" "'"$tmpdir/$path"'.read"' \
    > "$tmpdir/$path.answers" || fail "$path: the script failed"
  rbdc export --no-progress "$RBD_POOL/$im" "$tmpdir/$path.export" ||
    fail "rbd export failed"
  rbdc diff --format json "$RBD_POOL/$im" |
    /usr/bin/python3 -c '
import json, sys
for e in sorted(json.load(sys.stdin), key=lambda e: e["offset"]):
    print(e["offset"], e["length"], e["exists"])' > "$tmpdir/$path.diff"
done
paste "$tmpdir/async.answers" "$tmpdir/sync.answers"
diff -u "$tmpdir/sync.answers" "$tmpdir/async.answers" ||
  fail "the two paths answered differently"
grep -qx 'fast zero no-hole ENOTSUP' "$tmpdir/async.answers" ||
  fail "a thick fast zero was not refused with ENOTSUP"
diff -u "$tmpdir/sync.diff" "$tmpdir/async.diff" ||
  fail "the two paths left different allocations"
cmp "$tmpdir/sync.export" "$tmpdir/async.export" ||
  fail "the two paths left different bytes"
cmp "$tmpdir/async.read" "$tmpdir/async.export" ||
  fail "the asynchronous path read other bytes than the image holds"
