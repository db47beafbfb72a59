#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# ondemand share=true (nbdkit 1.42): two clients use one export at the
# same time, each reading what the other wrote, and the bytes land in
# the export's file; without share=true the second is refused (the
# lock).  A second server on the same directory without share=true
# refuses a writer the export the sharing clients hold, but lets a
# read-only one in.  A bad value stops the server with one line.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo truncate

d="$tmpdir/exports"
mkdir "$d"
blank='truncate -s $size "$disk"'
export d

# two_clients SOCK: two connections to export "shared" at once, the
# second opened while the first is still connected.
two_clients ()
{
  t nbdsh -c - <<PY
def conn():
    h = nbd.NBD()
    h.set_export_name("shared")
    h.connect_unix("$1")
    return h
a = conn()
a.pwrite(b"from client A", 0)
b = conn()
assert b.pread(13, 0) == b"from client A", "B does not see A's write"
b.pwrite(b"from client B", 65536)
assert a.pread(13, 65536) == b"from client B", "A does not see B's write"
a.flush()
b.flush()
print("both connected at once")
# While A and B hold it, another server's writer is refused and its
# reader admitted.
import subprocess, os
other = "$tmpdir/other.sock"
w = subprocess.run(["$NBDKIT", "-U", "-", "ondemand", "dir=$d", "1M",
                    "command=true", "--run",
                    'nbdinfo --size "nbd+unix:///shared?socket=\$unixsocket"'],
                   capture_output=True, text=True)
assert w.returncode != 0, "a writer of another server got the export"
assert "locked by another client" in w.stderr, w.stderr
r = subprocess.run(["$NBDKIT", "-r", "-U", "-", "ondemand", "dir=$d", "1M",
                    "command=true", "--run",
                    'nbdinfo --size "nbd+unix:///shared?socket=\$unixsocket"'],
                   capture_output=True, text=True)
assert r.returncode == 0, "a reader of another server was refused: " + r.stderr
a.shutdown()
b.shutdown()
PY
}

start_server ondemand dir="$d" 1M command="$blank" share=true
two_clients "$sock" || fail "share=true: two clients could not share"
stop_server
[ "$(head -c 13 "$d/shared")" = "from client A" ] ||
  fail "A's bytes are not in the export's file"
[ "$(tail -c +65537 "$d/shared" | head -c 13)" = "from client B" ] ||
  fail "B's bytes are not in the export's file"

# Without share=true, the second client is refused.
start_server ondemand dir="$d" 1M command="$blank" 2> "$tmpdir/err"
if two_clients "$sock" 2> /dev/null; then
  fail "two clients shared an export without share=true"
fi
grep -q "shared: filesystem is locked by another client" "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "no lock error without share=true"; }
stop_server

refuses "share" ondemand dir="$d" 1M share=maybe ||
  fail "share=maybe accepted"
