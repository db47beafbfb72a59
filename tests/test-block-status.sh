#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Block status (base:allocation) on a sparse memory disk: a written
# megabyte is data, everything else is hole+zero.  Checked through
# nbdinfo --map and through nbdsh's block_status.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh

start_server memory 64M
t nbdsh -u "$uri" -c 'h.pwrite(b"\x01" * 1048576, 1048576)'

# nbdinfo --map merges adjacent extents of one type.
t nbdinfo --map "$uri" > "$tmpdir/map"
cat "$tmpdir/map"
cat > "$tmpdir/expected" <<'MAP'
0 1048576 3 hole,zero
1048576 1048576 0 data
2097152 65011712 3 hole,zero
MAP
awk '{ print $1, $2, $3, $4 }' "$tmpdir/map" > "$tmpdir/map.norm"
diff -u "$tmpdir/expected" "$tmpdir/map.norm" || fail "nbdinfo --map differs"

# nbdsh: ask from offset 0 over the whole disk, merge runs, compare.
t nbdsh --base-allocation -u "$uri" -c - <<'PY'
size = h.get_size()
assert h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
runs = []
def cb(metacontext, offset, entries, err):
    assert metacontext == nbd.CONTEXT_BASE_ALLOCATION, metacontext
    pos = offset
    for i in range(0, len(entries), 2):
        length, flags = entries[i], entries[i + 1]
        assert length > 0, entries
        if runs and runs[-1][2] == flags and runs[-1][0] + runs[-1][1] == pos:
            runs[-1][1] += length
        else:
            runs.append([pos, length, flags])
        pos += length
    return 0
off = 0
while off < size:
    before = runs[-1][0] + runs[-1][1] if runs else 0
    h.block_status(min(size - off, 2**31), off, cb)
    end = runs[-1][0] + runs[-1][1]
    assert end > off, "block_status made no progress"
    off = end
print(runs)
assert runs == [[0, 1048576, 3], [1048576, 1048576, 0], [2097152, size - 2097152, 3]], runs
PY
