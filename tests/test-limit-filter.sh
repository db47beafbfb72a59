#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=limit: with limit=2 two clients are served and a third is
# refused (and the server says why) until one of the two leaves; the
# default is 1; a client that finished its handshake while another was
# still negotiating takes the place, and the slow one's NBD_OPT_GO
# fails; limit=0 serves many at once; a bad limit stops the server.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

# hold NAME: a client that connects, says so in $tmpdir/NAME.up, and
# stays until $tmpdir/NAME.go exists (at most 30 s).
hold ()
{
  nbdsh -u "$uri" -c "
import os, time
assert h.get_size() == 1048576
open('$tmpdir/$1.up', 'w').close()
for i in range(300):
    if os.path.exists('$tmpdir/$1.go'):
        break
    time.sleep(0.1)
" &
  cleanup_fn _kill_pid $!
  wait_for 20 -f "$tmpdir/$1.up" || fail "client $1 did not connect"
}
release ()
{
  touch "$tmpdir/$1.go"
}
can_connect ()
{
  t nbdinfo --size "$uri" > "$tmpdir/out" 2>&1
}

start_server --filter=limit memory 1M limit=2 2> "$tmpdir/server.log"
hold a
hold b
expect_fail can_connect || fail "a third client got in with limit=2"
grep -q "2 clients already connected (limit=2)" "$tmpdir/server.log" ||
  { cat "$tmpdir/server.log"; fail "the server did not say why"; }
release a
# Its place is freed when the server has closed it: retry for a while.
for i in $(seq 50); do can_connect && break; sleep 0.1; done
can_connect || fail "no client got in after one of two left"
release b
stop_server

# Default limit=1; a client still negotiating has no place yet, and
# loses the race to one that opens the export first.
start_server --filter=limit memory 1M
t nbdsh -c - <<PY
import nbd
slow = nbd.NBD()
slow.set_opt_mode(True)
slow.connect_uri("$uri")
h.connect_uri("$uri")
assert h.get_size() == 1048576
try:
    slow.opt_go()
except nbd.Error as e:
    print("slow client refused: %s" % e)
else:
    raise AssertionError("second client opened the export with limit=1")
h.shutdown()
PY
can_connect || fail "limit=1: no client after the first left"
stop_server

# nbdcopy with 4 connections and many requests in flight fits in
# limit=4, twice over (every place is given back), but not in limit=3.
start_server --filter=limit memory 8M limit=4
head -c 8M /dev/urandom > "$tmpdir/src"
t nbdcopy --threads=4 --connections=4 --requests=16 "$tmpdir/src" "$uri"
t nbdcopy --threads=4 --connections=4 --requests=16 "$uri" "$tmpdir/dst"
cmp "$tmpdir/src" "$tmpdir/dst" || fail "nbdcopy through limit=4: data differs"
stop_server
start_server --filter=limit memory 8M limit=3
expect_fail t nbdcopy --threads=4 --connections=4 --requests=16 \
  "$tmpdir/src" "$uri" 2> /dev/null
stop_server

# limit=0: no limit.
start_server --filter=limit memory 1M limit=0
for c in c1 c2 c3 c4 c5; do hold $c; done
can_connect || fail "limit=0 refused a sixth client"
for c in c1 c2 c3 c4 c5; do release $c; done
stop_server

# Bad values: one line naming the parameter, exit 1.
for bad in limit=x limit=-1 limit= limit=1.5 limit=99999999999; do
  refuses "limit: " --filter=limit null "$bad" ||
    fail "$bad: not refused with one line naming limit"
done
