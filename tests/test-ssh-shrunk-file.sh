#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The remote file shrinks while the ssh plugin serves it (the size was
# read at connection time): a read that crosses the new end gets EIO,
# not stale or zero bytes, and the plugin says why; reads before the
# new end still return the file's bytes, and the server stays up.
# The crossing read is pipelined: the server answers some pieces in
# full, one short and the rest with end of file, which exercises the
# plugin's short-reply path.
# It would catch a short reply taken as a full one (zeroes or garbage
# sent to the client) or a hang on end of file.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/sshd-start.sh"
requires_cmd nbdsh
start_sshd
disk="$tmpdir/disk"
head -c $(( 4 * 1024 * 1024 )) /dev/urandom > "$disk"
start_ssh_server ssh "${sshd_args[@]}" "$disk" 2> "$tmpdir/server.err"
t nbdsh -u "$uri" -c "
import os
size = h.get_size()
with open('$disk', 'rb') as f:
    data = f.read()
os.truncate('$disk', size - 100000)
# From 1 MiB before the old end: 900000 bytes are there, the rest not.
try:
    h.pread(1048576, size - 1048576)
    raise Exception('a read past the new end succeeded')
except nbd.Error as e:
    assert e.errno == 'EIO', e.errno
assert h.pread(1048576, 0) == data[:1048576]
assert h.pread(500000, size - 600000) == data[size - 600000:size - 100000]
" || fail "reads of a shrunk file went wrong"
kill -0 "$server_pid" || fail "the server died"
stop_ssh_server
cat "$tmpdir/server.err"
grep -q "the file ended at" "$tmpdir/server.err" ||
  fail "the plugin did not say the file ended"
