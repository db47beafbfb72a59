#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=extentlist: the map a client sees is the file's list (any
# order, gaps as holes, types as numbers or words), reads still come
# from the plugin, a one-extent request gets one extent, Debian's
# nbdkit gives the same map and bytes; and every bad line is refused
# at start-up with one error naming the file and the line.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024))
cp "$disk.orig" "$disk"
list="$tmpdir/list"
cat > "$list" <<'EOF'
# comments and blank lines are skipped

3M      64K
0       1M
1M      512K    hole
2M      1M      hole,zero
1536K   256K    2
1792K	8K	zero
EOF

start_server -r --filter=extentlist file "$disk" extentlist="$list"
# Neighbours of the same type come out merged.
t nbdinfo --map "$uri" > "$tmpdir/map"
cat > "$tmpdir/want" <<'EOF'
0 1048576 0
1048576 524288 1
1572864 270336 2
1843200 1302528 3
3145728 65536 0
3211264 983040 3
EOF
awk '{print $1, $2, $3}' "$tmpdir/map" > "$tmpdir/got"
diff -u "$tmpdir/want" "$tmpdir/got" || fail "the map is not the list's"
t nbdsh --base-allocation -u "$uri" -c - <<PY || fail "reads or REQ_ONE"
disk = open("$disk", "rb").read()
assert h.pread(65536, 1048576) == disk[1048576:1048576 + 65536]
got = []
h.block_status(2 * 1048576, 1000, lambda ctx, off, ents, err: got.extend(ents),
               nbd.CMD_FLAG_REQ_ONE)
assert got == [1048576 - 1000, 0], got
PY
stop_server

state_files=("$disk")
# Debian's nbdkit takes no comments and no blank lines.
grep -v -e '^#' -e '^$' "$list" > "$list.plain"
compare_own "extentlist read" read -r --filter=extentlist file "$disk" \
  extentlist="$list.plain"
printf '0 4M\n' > "$tmpdir/all"
compare_own "extentlist all data" read -r --filter=extentlist file "$disk" \
  extentlist="$tmpdir/all"
finish

# Bad lists: exit 1, one line, naming the file and the line.
n=0
while IFS='|' read -r content line; do
  n=$((n + 1))
  printf "$content" > "$tmpdir/bad$n"
  status=0
  "$NBDKIT" --filter=extentlist null 1M extentlist="$tmpdir/bad$n" \
            --run true > "$tmpdir/msg" 2>&1 || status=$?
  [ "$status" -eq 1 ] && [ "$(wc -l < "$tmpdir/msg")" -eq 1 ] &&
    grep -q "bad$n:$line:" "$tmpdir/msg" ||
    { cat "$tmpdir/msg"; fail "'$content': want exit 1 and one line naming line $line"; }
done <<'EOF'
0 1M\n1M 1M foo\n|2
x 1M\n|1
0\n|1
0 1M\n\n0 1M 1 extra\n|3
0 1M 7\n|1
0 1M -1\n|1
0 1M hole,\n|1
0 1M holes\n|1
# ok\n0 1M\n512K 1M\n|3
0 1Q\n|1
9223372036854775807 1\n|1
EOF
for bad in "extentlist=$tmpdir/missing" ""; do
  status=0
  "$NBDKIT" --filter=extentlist null 1M $bad --run true \
            > "$tmpdir/msg" 2>&1 || status=$?
  [ "$status" -eq 1 ] && [ "$(wc -l < "$tmpdir/msg")" -eq 1 ] &&
    grep -q extentlist "$tmpdir/msg" ||
    { cat "$tmpdir/msg"; fail "'$bad': want exit 1 and one line"; }
done
