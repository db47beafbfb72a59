#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=ext2 ext2file=exportname serves the file the client names
# (with or without a leading /), refuses the default export, links,
# directories and missing files (and the server lives on), and lists
# no exports; bad ext2file= values exit 1 with one line naming
# ext2file; an image that is not ext2, or is cut short (in its metadata
# or in the file's data), fails cleanly with the server still up; a
# second client waits until the first has gone.
source "$(dirname "$0")/functions.sh"
requires_cmd mke2fs debugfs nbdsh nbdinfo

dir="$tmpdir/dir"
mkdir -p "$dir/disks" "$dir/emptydir"
printf 'hello\n' > "$dir/small"
head -c 1048576 /dev/urandom > "$dir/disks/disk.raw"
ln -s small "$dir/link"
img="$tmpdir/fs.img"
mke2fs -q -t ext4 -d "$dir" "$img" 16M

# --- ext2file=exportname --------------------------------------------------
start_server --filter=ext2 file "$img" ext2file=exportname
t nbdsh -c - <<PY
import errno
def connect(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix("$sock")
    return h
for name in ("/small", "small"):
    c = connect(name)
    assert c.get_size() == 6 and c.pread(6, 0) == b"hello\n", name
    c.shutdown()
c = connect("/disks/disk.raw")
assert c.pread(1048576, 0) == open("$dir/disks/disk.raw", "rb").read()
c.shutdown()
for name in ("", "/", "/link", "/emptydir", "/nonexistent", "/small/x"):
    try:
        connect(name)
    except nbd.Error:
        pass
    else:
        raise AssertionError("export %r was served" % name)
PY
t nbdinfo --list --json "$uri" > "$tmpdir/list"
/usr/bin/python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["exports"]
assert e == [], e' "$tmpdir/list" ||
  fail "exports listed: $(cat "$tmpdir/list")"
kill -0 "$server_pid" || fail "server died"
stop_server

# --- One connection at a time ---------------------------------------------
start_server --filter=ext2 file "$img" ext2file=/small
t nbdsh -c - <<PY
import time, threading
a = nbd.NBD()
a.connect_unix("$sock")
assert a.pread(5, 0) == b"hello"
got = []
def second():
    b = nbd.NBD()
    b.connect_unix("$sock")
    got.append(time.monotonic())
    b.shutdown()
th = threading.Thread(target=second)
th.start()
time.sleep(1)
assert not got, "a second client got in while the first was connected"
released = time.monotonic()
a.shutdown()
th.join(30)
assert got and got[0] >= released, got
PY
stop_server

# --- Bad parameters -------------------------------------------------------
for args in "" "ext2file=small" "ext2file=" "ext2file=/a ext2file=/b" \
            "ext2file=exportname ext2file=/a"; do
  # shellcheck disable=SC2086
  refuses "ext2.*ext2file" --filter=ext2 file "$img" $args ||
    fail "'$args': not refused with one line naming ext2file"
done

# --- Images that are not ext2, or cut short -------------------------------
head -c 16M /dev/urandom > "$tmpdir/random.img"
head -c 100000 "$img" > "$tmpdir/short.img"
for bad in "$tmpdir/random.img" "$tmpdir/short.img"; do
  start_server --filter=ext2 file "$bad" ext2file=/disks/disk.raw
  for i in 1 2; do
    t nbdsh -u "$uri" -c 'h.pread(h.get_size(), 0)' > "$tmpdir/out" 2>&1 &&
      fail "$bad: the file was served"
  done
  kill -0 "$server_pid" || fail "$bad: the server died"
  stop_server
done

# Cut inside the file's data: the metadata is whole, so the file opens,
# but reads past the cut fail with EIO and the start still reads.
blk=$(debugfs -R 'bmap /disks/disk.raw 0' "$img" 2>/dev/null)
[ -n "$blk" ] && [ "$blk" -gt 0 ] || fail "no block 0 of disk.raw: '$blk'"
bs=$(debugfs -R stats "$img" 2>/dev/null | awk '/^Block size:/ { print $3 }')
head -c $(( blk * bs + 8192 )) "$img" > "$tmpdir/cut.img"
start_server --filter=ext2 file "$tmpdir/cut.img" ext2file=/disks/disk.raw
t nbdsh -u "$uri" -c - <<PY
import errno
data = open("$dir/disks/disk.raw", "rb").read()
assert h.pread(4096, 0) == data[:4096]
try:
    h.pread(4096, 512 * 1024)
except nbd.Error as ex:
    assert ex.errnum == errno.EIO, ex
else:
    raise AssertionError("read past the end of the image succeeded")
assert h.pread(100, 10) == data[10:110]
PY
kill -0 "$server_pid" || fail "cut image: the server died"
stop_server
