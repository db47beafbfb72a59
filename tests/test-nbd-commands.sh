#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every command and flag a client sends through the nbd plugin reaches
# the upstream as sent: write with FUA, zero with fast-zero and with
# no-hole (a client that does not allow trimming), trim with FUA, flush,
# cache, and block status with req-one.  The upstream is our memory
# plugin under the log filter, whose log shows each request and its
# flags.
# Catches: a flag dropped or invented on the way (FUA lost makes a
# write not durable; NO_HOLE lost lets the upstream punch holes), a
# command turned into another (zero into write, cache into read).
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdsh
[ -f "$abs_top_builddir/filters/log/.libs/nbdkit-log-filter.so" ] ||
  fail "the log filter was not built"

log="$tmpdir/up.log"
start_upstream --filter=log memory 4M logfile="$log"
start_server nbd socket="$up_sock"

t nbdsh --base-allocation -u "$uri" -c '
h.pwrite(b"a" * 4096, 0, nbd.CMD_FLAG_FUA)
h.pwrite(b"b" * 4096, 4096)
h.zero(8192, 65536, nbd.CMD_FLAG_FAST_ZERO)
h.zero(8192, 131072, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
h.trim(4096, 196608, nbd.CMD_FLAG_FUA)
h.flush()
h.cache(512, 262144)
seen = []
h.block_status(1048576, 0,
               lambda ctx, off, ents, err: seen.append(len(ents)),
               nbd.CMD_FLAG_REQ_ONE)
assert seen == [2], seen
'
stop_server
cat "$log"

# want REGEX: the upstream's log has a request matching REGEX.
want ()
{
  grep -Eq "$1" "$log" || fail "upstream never saw: $1"
}
want 'Write id=[0-9]+ offset=0x0 count=0x1000 fua=1 '
want 'Write id=[0-9]+ offset=0x1000 count=0x1000 fua=0 '
want 'Zero id=[0-9]+ offset=0x10000 count=0x2000 trim=1 fua=0 fast=1 '
want 'Zero id=[0-9]+ offset=0x20000 count=0x2000 trim=0 fua=1 fast=0 '
want 'Trim id=[0-9]+ offset=0x30000 count=0x1000 fua=1 '
want 'Flush id=[0-9]+ '
want 'Cache id=[0-9]+ offset=0x40000 count=0x200 '
want 'Extents id=[0-9]+ offset=0x0 count=0x100000 req_one=1 '
# Nothing else: no read for the cache request, no write for the zeroes.
[ "$(grep -c ' Write id' "$log")" = 2 ] || fail "extra writes upstream"
grep -q 'Read id' "$log" && fail "a read reached the upstream" || :
