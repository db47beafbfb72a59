#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# When the file system under TMPDIR fills up, a write through
# --filter=cow or --filter=cache that needs new room in the overlay
# fails with ENOSPC and the server carries on: what was written before
# reads back, rewriting it still works, and trimming gives room back
# for new writes.  TMPDIR here is an 8 MiB tmpfs mounted in a mount
# namespace of the server's own (so nothing is left mounted, whatever
# happens).  Debian's nbdkit, whose overlay is also a file in TMPDIR,
# fails the same write with ENOSPC and keeps the earlier bytes, but
# neither of its filters gives a trimmed block's room back, so the last
# step is ours alone.
source "$(dirname "$0")/../functions.sh"
requires_root
requires_cmd unshare nbdsh
requires unshare -m true

# What the client does.  The cache filter, over null, writes blocks
# back to null at flush; they stay cached (CLEAN), so the bytes still
# read back from the cache file.
cat > "$tmpdir/client.py" <<'EOF'
import os, sys
filter = os.environ["FILTER"]
trim_frees = os.environ["TRIM_FREES"] == "1"
M = 1024 * 1024
a, b = b"a" * (4 * M), b"b" * (2 * M)
h.pwrite(a, 0)
# 16 MiB more cannot fit in 8 MiB.
try:
    for i in range(16):
        h.pwrite(b"x" * M, 16 * M + i * M)
    raise Exception("16 MiB more fitted in an 8 MiB TMPDIR")
except nbd.Error as e:
    assert e.errno == "ENOSPC", "a full TMPDIR gave %s" % e.errno
# Earlier bytes intact, and rewritable in place.
assert h.pread(4 * M, 0) == a
h.pwrite(b, M)
assert h.pread(4 * M, 0) == a[:M] + b + a[3 * M:]
h.flush()
if not trim_frees:
    print("ok", filter, "(not trimming)")
    sys.exit(0)
# Give the room back: trimmed (cow) or trimmed-through and dropped
# (cache) blocks free their space in the file, so new writes fit.
h.trim(48 * M, 0)
for i in range(4):
    h.pwrite(b"y" * M, 32 * M + i * M)
assert h.pread(4 * M, 32 * M) == b"y" * (4 * M)
print("ok", filter)
EOF

# run BIN FILTER TRIM-FREES: the client against BIN with its overlay in
# a small tmpfs.  (The inner shell reads its parameters from the
# environment.)
run ()
{
  mkdir -p "$tmpdir/small"
  BIN="$1" FILTER="$2" TRIM_FREES="$3" CLIENT="$tmpdir/client.py" SMALL="$tmpdir/small" \
    t unshare -m sh -c '
      mount -t tmpfs -o size=8m nbdkit-test "$SMALL" || exit 1
      TMPDIR="$SMALL" exec "$BIN" -U - --filter="$FILTER" null 64M \
        --run '\''nbdsh -u "$uri" -c "exec(open(\"$CLIENT\").read())"'\''
    ' || fail "$1 --filter=$2 with a full TMPDIR"
}

for filter in cow cache; do
  run "$NBDKIT" "$filter" 1
done
if [ -x /usr/bin/nbdkit ]; then
  run /usr/bin/nbdkit cow 0
  run /usr/bin/nbdkit cache 0
fi
