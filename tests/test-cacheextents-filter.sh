#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=cacheextents: a client walking the disk one extent at a time
# (REQ_ONE, as qemu-img does) gets the same map as without the filter,
# while the plugin (seen through Debian's log filter below ours) is
# asked far less often; a write drops the cache, so the map then shows
# the written data; Debian's nbdkit gives the same map and bytes.  The
# filter says in the debug log that it is deprecated (nbdkit 1.44).
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd qemu-img nbdinfo

logfilter="$debian_filterdir/nbdkit-log-filter.so"
requires test -f "$logfilter"
disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((8 * 1024 * 1024))
cp "$disk.orig" "$disk"
log="$tmpdir/plugin.log"

start_server --filter=cacheextents --filter="$logfilter" file "$disk" \
  logfile="$log"
cat > "$tmpdir/walk.py" <<'PY'
# Walk the disk one extent at a time; print the merged map.
def walk():
    size = h.get_size()
    out, off = [], 0
    while off < size:
        got = []
        h.block_status(min(size - off, 1 << 30), off,
                       lambda ctx, o, ents, err: got.extend(ents),
                       nbd.CMD_FLAG_REQ_ONE)
        n, t = got[0], got[1]
        if out and out[-1][2] == t:
            out[-1][1] += n
        else:
            out.append([off, n, t])
        off += n
    return out
PY
t nbdsh --base-allocation -u "$uri" -c - <<PY || fail "walking the map"
exec(open("$tmpdir/walk.py").read())
before = walk()
print(len(before), "extents")
# The pattern: 64K of data every 256K, holes between.
assert before[0] == [0, 65536, 0], before[:2]
assert before[1] == [65536, 196608, 3], before[:2]
assert len(before) == 64, len(before)
open("$tmpdir/calls-before", "w").write(str(
    open("$log").read().count(" Extents ")))
# Writing into a hole must show at once.
h.pwrite(b"x" * 4096, 131072)
after = walk()
assert after[1] == [65536, 65536, 3], after[:4]
assert after[2] == [131072, 4096, 0], after[:4]
PY
calls="$(cat "$tmpdir/calls-before")"
echo "plugin extents calls for a 64-step walk: $calls"
[ "$calls" -ge 1 ] && [ "$calls" -le 4 ] ||
  fail "the plugin was asked $calls times for one walk (cache not used?)"
stop_server

# qemu-img map through the filter shows the file's map.
cp "$disk.orig" "$disk"
start_server -r --filter=cacheextents file "$disk"
t qemu-img map --output=json -f raw "$uri" > "$tmpdir/qmap"
t qemu-img map --output=json -f raw "$disk" > "$tmpdir/fmap"
diff -u "$tmpdir/fmap" "$tmpdir/qmap" | head -20
/usr/bin/python3 - "$tmpdir/fmap" "$tmpdir/qmap" <<'PY' || fail "qemu-img map differs"
import json, sys
def data(path):
    return [(e["start"], e["length"]) for e in json.load(open(path)) if e["data"]]
assert data(sys.argv[1]) == data(sys.argv[2])
PY
stop_server

state_files=("$disk")
compare_own "cacheextents read" read --filter=cacheextents file "$disk"
compare_own "cacheextents write" write --filter=cacheextents file "$disk"
finish

# Deprecated, still working: the notice is in the debug log once.
t "$NBDKIT" -U - -v --filter=cacheextents memory 1M \
  --run 'nbdinfo --map "$uri"' > "$tmpdir/dep.out" 2> "$tmpdir/dep.err" ||
  fail "cacheextents with -v failed"
[ "$(grep -c 'cacheextents: debug: the cacheextents filter is deprecated' \
      "$tmpdir/dep.err")" -eq 1 ] ||
  { cat "$tmpdir/dep.err"; fail "no single deprecation notice"; }
grep -q 'hole,zero' "$tmpdir/dep.out" || fail "no map through the filter"
