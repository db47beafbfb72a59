#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A negotiation is bounded by what abuse costs, not by honest use
# (nbdkit-protocol(1), Limits):
#  - nbdinfo --list of a file dir= with 5000 files lists all 5000
#    exports, though that takes over 5000 options (a cap of 4096 options
#    cut it off after about 2800, with nothing in the log);
#  - a client whose options keep failing is dropped after 1024 error
#    replies, a client sending more than 16 MiB of options likewise, and
#    each drop is one line in the log naming the client and the reason;
#    the server serves on.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

mkdir "$tmpdir/dir"
/usr/bin/python3 - "$tmpdir/dir" <<'PY'
import os, sys
for i in range(5000):
    with open(os.path.join(sys.argv[1], "e%04d" % i), "wb") as f:
        f.truncate(512)
PY
start_server file dir="$tmpdir/dir"
t nbdinfo --list --json "$uri" > "$tmpdir/list.json"
n=$(/usr/bin/python3 -c 'import json, sys
print(len(json.load(open(sys.argv[1]))["exports"]))' "$tmpdir/list.json")
[ "$n" = 5000 ] || fail "nbdinfo --list listed $n of 5000 exports"
stop_server

# Abuse: failing options, then too much option data.
start_server -v memory 1M 2> "$tmpdir/server.err"
cat > "$tmpdir/abuse.py" <<'PY'
import socket, struct, sys
sys.path.insert(0, sys.argv[2])
from nbd_raw import greet, option, reply
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.settimeout(20)
    greet(s)
    return s
def flood(s, n, data):
    """Send N options 0x4242 carrying DATA; how many replies came."""
    got = 0
    try:
        for i in range(n):
            option(s, 0x4242, data)
            reply(s)
            got += 1
    except (EOFError, ConnectionError):
        pass
    return got
got = flood(conn(), 2000, b"")
print("failing options answered before the drop:", got)
assert got == 1024, got
# 300 options of 64 KiB: the 16 MiB of option data run out after about
# 256 of them, long before 1024 errors.
got = flood(conn(), 300, b"x" * 65536)
print("64 KiB options answered before the drop:", got)
assert got < 300, got
PY
t /usr/bin/python3 "$tmpdir/abuse.py" "$sock" "$srcdir"
[ "$(nbdinfo --size "$uri")" = 1048576 ] || fail "the server stopped serving"
stop_server
cat "$tmpdir/server.err" | grep 'negotiation ended' || :
grep -q 'negotiation ended: too many failed options' "$tmpdir/server.err" ||
  fail "the drop for failing options was not logged"
grep -q 'negotiation ended: too much option data' "$tmpdir/server.err" ||
  fail "the drop for too much option data was not logged"
