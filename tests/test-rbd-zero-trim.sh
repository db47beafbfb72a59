#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's trim, zero and block status: after writes, trims and
# zeroes (with and without permission to punch holes, and through the
# zero-buffer fallback), the map the plugin gives (nbdinfo --map) has
# the same data ranges as the image's real allocation ("rbd diff"),
# every hole reads as zeroes, zeroed ranges read as zeroes, and the
# bytes match a local model.  Would catch: holes reported where data
# is, extents out of order or overlapping, a trim or zero at the wrong
# place, NO_HOLE zeroes that punch holes anyway, a fallback that leaves
# bytes behind.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
requires /usr/bin/python3 -c 'import json'
source "$srcdir/rbd-functions.sh"

M=$((1024 * 1024))
img=$(new_image zt 16M)
truncate -s 16M "$tmpdir/model"
export tmpdir

# Data ranges of "nbdinfo --map --json" (type without the hole bit) and
# of "rbd diff --format json", each merged, one "offset length" a line.
map_ranges ()
{
  t nbdinfo --map --json "$uri" | /usr/bin/python3 -c '
import json, sys
r = []
for e in json.load(sys.stdin):
    if e["type"] & 1: continue
    if r and r[-1][0] + r[-1][1] == e["offset"]: r[-1][1] += e["length"]
    else: r.append([e["offset"], e["length"]])
for o, l in r: print(o, l)'
}
diff_ranges ()
{
  rbdc diff --format json "$RBD_POOL/$img" | /usr/bin/python3 -c '
import json, sys
r = []
for e in sorted(json.load(sys.stdin), key=lambda e: e["offset"]):
    if e["exists"] != "true": continue
    if r and r[-1][0] + r[-1][1] == e["offset"]: r[-1][1] += e["length"]
    else: r.append([e["offset"], e["length"]])
for o, l in r: print(o, l)'
}
# check STEP: the two maps agree, holes read as zeroes, bytes = model.
check ()
{
  map_ranges > "$tmpdir/map"
  diff_ranges > "$tmpdir/diff"
  echo "$1: plugin map / rbd diff:"; paste "$tmpdir/map" "$tmpdir/diff"
  diff -u "$tmpdir/diff" "$tmpdir/map" ||
    fail "$1: the plugin's map differs from rbd diff"
  t nbdsh -u "$uri" -c '
import os
model = open(os.environ["tmpdir"] + "/model", "rb").read()
data = h.pread(len(model), 0)
assert data == model, "bytes differ from the model"
' || fail "$1: the bytes differ from the model"
}

start_server rbd "${rbd_args[@]}" image="$img"
# Data in objects 0, 1 (partly), 2 and 3.
t nbdsh -u "$uri" -c '
import os
model = open(os.environ["tmpdir"] + "/model", "r+b")
M = 1024 * 1024
for off, n in ((0, 8192), (5 * M, M), (8 * M, 4 * M), (12 * M, 4 * M)):
    b = os.urandom(n)
    h.pwrite(b, off)
    model.seek(off); model.write(b)
h.flush()
'
check write

# Trim all of object 2: it goes away.  Zero (may trim) object 0: a hole.
# Zero without may trim (NO_HOLE) half of object 3: stays data, zeroes.
t nbdsh -u "$uri" -c '
M = 1024 * 1024
h.trim(4 * M, 8 * M)
h.zero(4 * M, 0)
h.zero(2 * M, 12 * M, nbd.CMD_FLAG_NO_HOLE)
try:
    h.zero(M, 14 * M, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FAST_ZERO)
    raise Exception("a thick fast zero succeeded")
except nbd.Error as e:
    assert e.errno == "ENOTSUP", e.errno
h.flush()
'
dd if=/dev/zero of="$tmpdir/model" bs=1M seek=8 count=4 conv=notrunc 2>/dev/null
dd if=/dev/zero of="$tmpdir/model" bs=1M seek=0 count=4 conv=notrunc 2>/dev/null
dd if=/dev/zero of="$tmpdir/model" bs=1M seek=12 count=2 conv=notrunc 2>/dev/null
check "trim and zero"
grep -q "^$((8 * M)) " "$tmpdir/map" && fail "the trimmed object is still data"
grep -q "^0 " "$tmpdir/map" && fail "the zeroed object 0 is still data"
grep -q "^$((12 * M)) " "$tmpdir/map" ||
  fail "the NO_HOLE zero of object 3 left no data"
stop_server

# The fallback writes zero buffers (several in flight): 3 MiB + 100
# bytes at an odd offset, across objects 1 and 2 and 3.
start_server -D rbd.no_write_zeroes=1 rbd "${rbd_args[@]}" image="$img"
t nbdsh -u "$uri" -c '
M = 1024 * 1024
h.pwrite(b"\xff" * (4 * M), 8 * M)
h.zero(3 * M + 100, 5 * M + 7, nbd.CMD_FLAG_FUA)
'
/usr/bin/python3 -c '
import os
M = 1024 * 1024
f = open(os.environ["tmpdir"] + "/model", "r+b")
f.seek(8 * M); f.write(b"\xff" * (4 * M))
f.seek(5 * M + 7); f.write(bytes(3 * M + 100))'
check "zero fallback"
