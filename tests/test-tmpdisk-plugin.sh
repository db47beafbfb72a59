#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tmpdisk plugin: each connection gets its own fresh disk, made by
# mkfs (type=, label=) or by command= with the parameters as shell
# variables; the disk is gone when the client leaves.  A deterministic
# command gives the same bytes, map and flags as Debian's nbdkit; a
# failing command fails only that client; bad parameters exit 1 with
# one line.  (Debian's tmpdisk has no block status: its map is all
# data.  Ours reports the disk file's holes, checked here.)
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy mke2fs dumpe2fs truncate
source "$srcdir/debian-filters.sh"
requires test -f "$debian_plugindir/nbdkit-tmpdisk-plugin.so"

# Disks are made here, so we can see that none is left behind.
export TMPDIR="$tmpdir/disks"
mkdir "$TMPDIR"

# --- The default: an empty filesystem from mkfs ---------------------------
t "$NBDKIT" -U - tmpdisk 64M label=SCRATCH \
  --run 'nbdcopy "$uri" '"$tmpdir/ext4.img" ||
  fail "copying the default tmpdisk failed"
[ "$(stat -c %s "$tmpdir/ext4.img")" -eq $((64 << 20)) ] ||
  fail "default disk is $(stat -c %s "$tmpdir/ext4.img") bytes, not 64M"
dumpe2fs -h "$tmpdir/ext4.img" > "$tmpdir/ext4.info" 2>/dev/null ||
  fail "the default disk holds no ext2/3/4 filesystem"
grep -Eq '^Filesystem volume name: +SCRATCH$' "$tmpdir/ext4.info" ||
  fail "label=SCRATCH not set: $(grep 'volume name' "$tmpdir/ext4.info")"
grep -Eq '^Filesystem features:.*has_journal.*extent' "$tmpdir/ext4.info" ||
  fail "the default type is not ext4: $(grep features "$tmpdir/ext4.info")"

t "$NBDKIT" -U - tmpdisk 8M type=ext2 \
  --run 'nbdcopy "$uri" '"$tmpdir/ext2.img" || fail "type=ext2 failed"
dumpe2fs -h "$tmpdir/ext2.img" 2>/dev/null |
  grep -E '^Filesystem features:' | grep -vq has_journal ||
  fail "type=ext2 made a filesystem with a journal"

# --- A private disk per connection -----------------------------------------
start_server tmpdisk 1M command='truncate -s $size "$disk"'
t nbdsh -c - <<PY
h.connect_uri("$uri")
h2 = nbd.NBD()
h2.connect_uri("$uri")
assert h.get_size() == 1048576
h.pwrite(b"mine" * 1024, 8192)
assert h.pread(4096, 8192) == b"mine" * 1024
# The second client, connected at the same time, sees its own disk.
assert h2.pread(4096, 8192) == bytes(4096), "clients share a disk"
h2.pwrite(b"other", 0)
assert h.pread(5, 0) == bytes(5)
h.zero(4096, 8192)
assert h.pread(4096, 8192) == bytes(4096)
h.flush()
h2.shutdown()
h.shutdown()
# A new connection starts again from a fresh disk.
h3 = nbd.NBD()
h3.connect_uri("$uri")
assert h3.pread(4096, 8192) == bytes(4096), "disk outlived its client"
h3.shutdown()
PY
stop_server
[ -z "$(ls -A "$TMPDIR")" ] || fail "disks left behind: $(ls "$TMPDIR")"

# --- Variables reach the command, quoted ----------------------------------
greeting="it's \"quoted\" \$HOME \`x\` ;"
t "$NBDKIT" -U - tmpdisk 0 greeting="$greeting" type=xyz \
  command='printf "%s|%s|%s" "$greeting" "$type" "$size" > "$disk"' \
  --run 'nbdsh -u "$uri" -c "import sys; sys.stdout.buffer.write(h.pread(h.get_size(), 0))"' \
  > "$tmpdir/vars" || fail "the command with variables failed"
[ "$(cat "$tmpdir/vars")" = "$greeting|xyz|0" ] ||
  fail "variables reached the command as: $(cat "$tmpdir/vars")"

# --- Same command, same bytes, map and flags as Debian's nbdkit -----------
cmd='truncate -s $size "$disk"
printf "hello" | dd of="$disk" bs=1 seek=1048576 conv=notrunc status=none'
# Debian's tmpdisk reports no holes (its map is all data), ours reports
# the file's holes: compare all but the map, then check our map.
cat > "$tmpdir/nomap" <<SH
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 $probedir/flags.py
echo "copy \$(nbdcopy "\$1" - | sha256sum)"
echo "copy-all \$(nbdcopy --no-extents "\$1" - | sha256sum)"
SH
chmod +x "$tmpdir/nomap"
compare "tmpdisk command" "$tmpdir/nomap" tmpdisk 4M command="$cmd"
t "$NBDKIT" -U - tmpdisk 4M command="$cmd" --run 'nbdinfo --map "$uri"' |
  awk '{ print $1, $2, $4 }' > "$tmpdir/map"
cat > "$tmpdir/map.expected" <<MAP
0 1048576 hole,zero
1048576 4096 data
1052672 3141632 hole,zero
MAP
diff -u "$tmpdir/map.expected" "$tmpdir/map" ||
  fail "the map does not show the disk's holes"
# mkfs output differs in UUIDs and times: compare size and flags only.
for s in ours ref; do
  [ $s = ours ] && srv="$NBDKIT" || srv="$ref_nbdkit"
  t "$srv" -U - tmpdisk 32M type=ext4 \
    --run 'nbdinfo --json "$uri"' 2>/dev/null |
    /usr/bin/python3 "$probedir/flags.py" > "$tmpdir/mkfs.$s" ||
    note_failure "tmpdisk mkfs flags" "$srv failed"
done
diff -u "$tmpdir/mkfs.ref" "$tmpdir/mkfs.ours" ||
  note_failure "tmpdisk mkfs flags" "size or flags differ"

# --- A failing command fails the client, not the server -------------------
start_server tmpdisk 1M command='echo "making it" >&2; exit 3'
expect_fail t nbdinfo "$uri" 2> "$tmpdir/client.err" ||
  fail "a client connected although the command failed"
cat "$tmpdir/client.err"
# The server is still up for the next client.
expect_fail t nbdinfo "$uri" 2>/dev/null ||
  fail "second client connected although the command failed"
kill -0 "$server_pid" || fail "the server died when the command failed"
stop_server
[ -z "$(ls -A "$TMPDIR")" ] || fail "failed disks left behind: $(ls "$TMPDIR")"

# --- Bad parameters: exit 1, one line naming the parameter -----------------
bad ()
{
  local want="$1"
  shift
  refuses "$want" tmpdisk "$@" ||
    fail "tmpdisk $*: not refused with one line /$want/"
}
bad "size" type=ext4
bad "size" size=lots
bad "'disk'" 1M disk=/etc/passwd
bad "'no-good'" 1M no-good=1

finish
