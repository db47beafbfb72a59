#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What a filter asks the server to emulate is emulated at the layer
# boundary, whether or not the filter has the callback: Debian's
# nozero (zeromode=emulate: can_zero EMULATE), fua (fuamode=emulate:
# can_fua EMULATE) and nocache (cachemode=emulate: can_cache EMULATE)
# filters over Debian's log filter over memory.  The client sees zero,
# FUA and cache offered and working; the log below them shows what
# reached the layers: a write then a flush for a FUA write, a write of
# zeroes for a zero, a read for a cache request -- the same lines as
# under Debian's nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
fdir=/usr/lib/x86_64-linux-gnu/nbdkit/filters
requires test -f "$fdir/nbdkit-nozero-filter.so"

# run SERVER LOG: the client's session, logged below the filters.
run ()
{
  t "$1" -U - --filter="$fdir/nbdkit-nozero-filter.so" \
    --filter="$fdir/nbdkit-fua-filter.so" \
    --filter="$fdir/nbdkit-nocache-filter.so" \
    --filter="$fdir/nbdkit-log-filter.so" memory 1M \
    zeromode=emulate fuamode=emulate cachemode=emulate logfile="$2" \
    --run 'nbdsh -u "$uri" -c "
assert h.can_zero() and h.can_fua() and h.can_cache()
h.pwrite(b\"x\" * 4096, 0, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 0) == b\"x\" * 4096
h.zero(4096, 0)
assert h.pread(4096, 0) == bytearray(4096)
h.cache(4096, 8192)
"' || fail "the client session failed under $1"
  # The data calls, without timestamps and ids.
  grep -E 'connection=1 (Write|Read|Flush|Zero|Cache|Trim|\.\.\.)' "$2" |
    sed -e 's/^[^ ]* [^ ]* //' -e 's/ id=[0-9]*//' > "$2.calls"
}

run "$NBDKIT" "$tmpdir/ours.log"
run /usr/bin/nbdkit "$tmpdir/debian.log"
cat "$tmpdir/ours.log.calls"
diff -u "$tmpdir/debian.log.calls" "$tmpdir/ours.log.calls" ||
  fail "the calls that reached the log filter differ from Debian's nbdkit"
grep -q '^connection=1 Flush' "$tmpdir/ours.log.calls" ||
  fail "FUA was not emulated by a flush"
if grep -qE '^connection=1 (Zero|Cache)' "$tmpdir/ours.log.calls"; then
  fail "an emulated zero or cache reached the layer below as itself"
fi
