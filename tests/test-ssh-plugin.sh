#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin against a real sshd started here (tests/sshd-start.sh):
# the client reads the remote file's bytes and size, writes made through
# nbdsh land in the remote file at the right offset, flush and
# multi-conn are offered (OpenSSH has fsync@openssh.com) and a second
# connection sees the first one's writes, -r refuses writes, and
# Debian's nbdkit given the same command serves the same bytes and
# size and offers multi-conn too.
# It would catch reads or writes at the wrong offset or cut at the
# SFTP message size, a wrong size, a lost write, a missing flush.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdcopy nbdsh nbdinfo
start_sshd

disk="$tmpdir/disk"
# Not a multiple of the 255 KiB message size, to test a short last piece.
head -c $(( 3 * 1024 * 1024 + 12345 )) /dev/urandom > "$disk"
size=$(stat -c %s "$disk")

# Reads: the whole file, in nbdcopy's requests.
t "$NBDKIT" -U - ssh "${sshd_args[@]}" "$disk" \
  --run "nbdcopy \"\$uri\" $tmpdir/out" || fail "nbdcopy from ssh failed"
cmp "$disk" "$tmpdir/out" || fail "the bytes read differ from the file"

# Size, flush and a read crossing a chunk boundary, then writes.
cp "$disk" "$tmpdir/expected"
start_ssh_server ssh "${sshd_args[@]}" "$disk"
t nbdsh -u "$uri" -c "
assert h.get_size() == $size, h.get_size()
assert h.can_flush()
with open('$disk', 'rb') as f:
    f.seek(261120 - 100)
    assert h.pread(300000, 261120 - 100) == f.read(300000)
# One write of several messages, one small at an odd offset, the last
# bytes of the file; FUA on the last.
h.pwrite(b'A' * 600000, 1000)
h.pwrite(b'hello', 777777)
h.pwrite(b'Z' * 45, $size - 45, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(5, 777777) == b'hello'
# Multi-conn (OpenSSH has fsync@openssh.com): a second connection sees
# what the first wrote and flushed.
assert h.can_multi_conn()
h2 = nbd.NBD()
h2.connect_uri('$uri')
assert h2.pread(600000, 1000) == b'A' * 600000
h2.shutdown()
" || fail "nbdsh against the ssh plugin failed"
stop_ssh_server
python3 - "$tmpdir/expected" "$size" <<'PY'
import sys
p, size = sys.argv[1], int(sys.argv[2])
with open(p, 'r+b') as f:
    f.seek(1000); f.write(b'A' * 600000)
    f.seek(777777); f.write(b'hello')
    f.seek(size - 45); f.write(b'Z' * 45)
PY
cmp "$disk" "$tmpdir/expected" || fail "the writes did not land in the file"
[ "$(stat -c %s "$disk")" -eq "$size" ] || fail "the file changed size"

# Read-only: a write is refused, the file is untouched.
t "$NBDKIT" -r -U - ssh "${sshd_args[@]}" "$disk" --run "nbdsh -u \"\$uri\" -c '
try:
    h.pwrite(b\"x\", 0)
    raise Exception(\"write on -r succeeded\")
except nbd.Error:
    pass
'" || fail "-r did not refuse a write"
cmp "$disk" "$tmpdir/expected" || fail "-r changed the file"

# Same command, same bytes: Debian's nbdkit and its ssh plugin.
debian_nbdkit=/usr/sbin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/bin/nbdkit
if "$debian_nbdkit" ssh --version >/dev/null 2>&1; then
  n=0
  for server in "$NBDKIT" "$debian_nbdkit"; do
    n=$((n + 1))
    t "$server" -r -U - ssh "${sshd_args[@]}" "$disk" --run "
      nbdinfo --size \"\$uri\" > $tmpdir/size.$n &&
      nbdinfo --can multi-conn \"\$uri\" &&
      nbdcopy \"\$uri\" $tmpdir/copy" ||
      fail "$server ssh failed"
    cmp "$tmpdir/copy" "$disk" || fail "$server: bytes differ from the file"
  done
  [ "$(cat "$tmpdir"/size.*)" = "$(printf '%s\n' "$size" "$size")" ] ||
    fail "sizes differ: $(cat "$tmpdir"/size.*)"
else
  echo "$0: Debian's nbdkit ssh plugin is not installed: comparison skipped"
fi
