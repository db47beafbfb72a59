#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nfs plugin's errors, against a private nfs-ganesha
# (tests/nfs-ganesha.sh): a missing file or export and a bad URI stop
# the server at start-up with one line; a read-only export opened for
# writing fails the client's connection with libnfs's message in the
# log (and -r works on the read-only export); when ganesha is killed,
# requests fail with EIO within seconds, new connections fail, the
# server stays up, and it serves again once ganesha is back.
source "$(dirname "$0")/nfs-ganesha.sh"
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
start_ganesha

head -c 1048576 /dev/urandom > "$nfs_rw/disk.img"
cp "$nfs_rw/disk.img" "$nfs_ro/disk.img"

# Start-up.
refuses "nfs_open: .*NOENT" nfs "$nfs_url/export/missing.img" ||
  fail "a missing file was not refused"
refuses "nfs_mount: .*" nfs "$nfs_url/nosuch/disk.img" ||
  fail "a missing export was not refused"
refuses "uri: expected nfs://SERVER/EXPORT/FILE" nfs "http://127.0.0.1/x" ||
  fail "a non-NFS URI was not refused"
refuses "the uri parameter is required" nfs ||
  fail "no URI was not refused"
refuses "timeout: expected 1 to 3600 seconds" \
  nfs "$nfs_url/export/disk.img" timeout=0 || fail "timeout=0 was not refused"

# A read-only export: writable connections fail, -r ones read.
expect_fail t "$NBDKIT" -U - nfs "$nfs_url/ro/disk.img" \
  --run 'nbdinfo --size "$uri"' 2> "$tmpdir/err"
grep -Eq "nfs_open: .*ACCESS denied. Required access rw-. Allowed access r--" \
  "$tmpdir/err" || fail "read-only export: $(cat "$tmpdir/err")"
t "$NBDKIT" -r -U - nfs "$nfs_url/ro/disk.img" \
  --run "nbdcopy \"\$uri\" $tmpdir/copy" || fail "-r on the read-only export"
cmp "$nfs_ro/disk.img" "$tmpdir/copy" || fail "the read-only copy differs"

# Ganesha killed under a connected client: errors at once, no hang.
start_server nfs "$nfs_url/export/disk.img" timeout=3
t nbdsh -u "$uri" -c - <<PY || fail "the client failed"
import errno, os, time
assert len(h.pread(65536, 0)) == 65536
os.kill($ganesha_pid, 9)
for name, fn in (("read", lambda: h.pread(65536, 65536)),
                 ("write", lambda: h.pwrite(b"x" * 4096, 0)),
                 ("flush", lambda: h.flush())):
    start = time.monotonic()
    try:
        fn()
        assert False, name + " succeeded with ganesha dead"
    except nbd.Error as e:
        assert e.errnum == errno.EIO or e.errnum == errno.ETIMEDOUT, str(e)
    took = time.monotonic() - start
    assert took < 15, "%s took %.1f s" % (name, took)
PY
kill -0 "$server_pid" || fail "the server died with ganesha"
expect_fail t nbdinfo --size "$uri"
launch_ganesha
t nbdsh -u "$uri" -c "
with open('$nfs_rw/disk.img', 'rb') as f:
    assert h.pread(65536, 0) == f.read(65536)
" || fail "the server did not serve again once ganesha was back"
