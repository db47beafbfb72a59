#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=openonce over tmpdisk (which makes a fresh disk at each open
# of the plugin, and here counts its opens): the clients of one export
# share one open, so what one writes the others read, even while
# connected at the same time; another export gets its own open; a
# failed open is not kept, so the next client opens again.  Without
# the filter, every client opens the plugin.  Under the
# serialize_requests thread model the shared open still serves
# clients side by side.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

opens="$tmpdir/opens"
failopen="$tmpdir/failopen"
export OPENS="$opens" FAILOPEN="$failopen"
cmd='echo open >> "$opens"; [ ! -e "$failopen" ] && truncate -s $size "$disk"'
disk=(tmpdisk 1M command="$cmd" opens="$opens" failopen="$failopen")

# Without the filter: a disk per client.
start_server "${disk[@]}"
t nbdsh -u "$uri" -c 'h.pwrite(b"hello", 0)'
t nbdsh -u "$uri" -c 'assert h.pread(5, 0) == b"\0" * 5'
stop_server
[ "$(wc -l < "$opens")" -eq 2 ] || fail "control: $(wc -l < "$opens") opens"
rm "$opens"

start_server --filter=openonce "${disk[@]}"
URI="$uri" t nbdsh -u "$uri" -c - <<'PY'
import os
def opens():
    with open(os.environ["OPENS"]) as f:
        return len(f.readlines())

def client(export=""):
    c = nbd.NBD()
    c.connect_uri(os.environ["URI"].replace("///?", "///%s?" % export))
    return c

h.pwrite(b"hello", 0)
assert opens() == 1
# A second client while the first is still connected: same disk.
h2 = client()
assert h2.pread(5, 0) == b"hello"
h2.pwrite(b"world", 4096)
assert h.pread(5, 4096) == b"world"
h2.shutdown()
assert opens() == 1
# Another export name: another open, another disk.
h3 = client("other")
assert h3.pread(5, 0) == b"\0" * 5
assert opens() == 2
h3.shutdown()
# A failed open reaches the client and is not kept.
open(os.environ["FAILOPEN"], "w").close()
try:
    client("third")
except nbd.Error:
    pass
else:
    raise AssertionError("open did not fail")
assert opens() == 3
os.remove(os.environ["FAILOPEN"])
h4 = client("third")
h4.pwrite(b"3", 0)
assert opens() == 4
h4.shutdown()
PY
# Later clients of each export: no new open.
t nbdsh -u "$uri" -c 'assert h.pread(10, 0) == b"hello\0\0\0\0\0"'
t nbdsh -u "${uri/\/\/\/\?/\/\/\/third?}" -c 'assert h.pread(1, 0) == b"3"'
stop_server
[ "$(wc -l < "$opens")" -eq 4 ] || fail "$(wc -l < "$opens") opens, wanted 4"
rm "$opens"

# serialize_requests below: two clients copying at once through one open.
start_server --filter=openonce --filter=noparallel "${disk[@]}" \
  serialize=requests
URI="$uri" t nbdsh -u "$uri" -c - <<'PY'
import os
hs = [h, nbd.NBD()]
hs[1].connect_uri(os.environ["URI"])
for i, x in enumerate(hs):
    for j in range(32):
        x.aio_pwrite(bytes([i + 1]) * 4096, (2 * j + i) * 4096)
for x in hs:
    while x.aio_in_flight() > 0:
        x.poll(-1)
for j in range(64):
    assert h.pread(4096, j * 4096) == bytes([j % 2 + 1]) * 4096
PY
stop_server
[ "$(wc -l < "$opens")" -eq 1 ] || fail "serialized: $(wc -l < "$opens") opens"
