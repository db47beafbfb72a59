#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ssh plugin's create=true: the remote file is replaced by one of
# create-size bytes, all zero, with create-mode's permissions, when
# the first client connects (not at start-up), and a second connection
# does not truncate it again.  Debian's nbdkit given the same command
# makes the same file.  It would catch a file created at start-up or
# on every connection, a wrong size or mode, old contents left behind.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdcopy nbdsh nbdinfo
start_sshd

disk="$tmpdir/disk"
head -c 100000 /dev/urandom > "$disk"
cp "$disk" "$tmpdir/old"
size=$(( 10 * 1024 * 1024 + 512 ))

# Bad combinations stop the server at start-up.
expect_fail t "$NBDKIT" -U - ssh "${sshd_args[@]}" "$disk" create=true \
  --run true 2> "$tmpdir/err" || fail "create=true without create-size ran"
grep -q "create-size" "$tmpdir/err" || fail "no word of create-size: $(cat "$tmpdir/err")"
expect_fail t "$NBDKIT" -U - ssh "${sshd_args[@]}" "$disk" create=true \
  create-size=1M create-mode=999 --run true 2>/dev/null ||
  fail "create-mode=999 was taken"

start_ssh_server ssh "${sshd_args[@]}" "$disk" create=true \
  create-size=$size create-mode=0640
cmp "$disk" "$tmpdir/old" || fail "the file changed before any client came"
t nbdsh -u "$uri" -c "
assert h.get_size() == $size, h.get_size()
assert h.pread(4096, 0) == bytes(4096)
h.pwrite(b'kept', 5000000)
h.flush()
" || fail "the first client failed"
[ "$(stat -c '%s %a' "$disk")" = "$size 640" ] ||
  fail "created file is $(stat -c '%s %a' "$disk"), expected $size 640"
# A second connection must not truncate the file again.
t nbdsh -u "$uri" -c "assert h.pread(4, 5000000) == b'kept'" ||
  fail "the second connection re-created the file"
stop_ssh_server
cmp -n 5000000 "$disk" /dev/zero || fail "old bytes left in the new file"

# Same command, same file from Debian's nbdkit.
debian_nbdkit=/usr/sbin/nbdkit
[ -x "$debian_nbdkit" ] || debian_nbdkit=/usr/bin/nbdkit
if "$debian_nbdkit" ssh --version >/dev/null 2>&1; then
  n=0
  for server in "$NBDKIT" "$debian_nbdkit"; do
    n=$((n + 1))
    cp "$tmpdir/old" "$tmpdir/disk.$n"
    t "$server" -U - ssh "${sshd_args[@]}" "$tmpdir/disk.$n" create=true \
      create-size=3M create-mode=0604 \
      --run "nbdcopy \"\$uri\" $tmpdir/copy.$n" || fail "$server failed"
    stat -c '%s %a' "$tmpdir/disk.$n" > "$tmpdir/stat.$n"
  done
  cmp "$tmpdir/copy.1" "$tmpdir/copy.2" || fail "the bytes served differ"
  cmp "$tmpdir/disk.1" "$tmpdir/disk.2" || fail "the files made differ"
  [ "$(cat "$tmpdir/stat.1")" = "$(cat "$tmpdir/stat.2")" ] ||
    fail "size and mode differ: $(cat "$tmpdir/stat.1") vs $(cat "$tmpdir/stat.2")"
else
  echo "$0: Debian's nbdkit ssh plugin is not installed: comparison skipped"
fi
