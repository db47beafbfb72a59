#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fua flush-on-close=true (nbdkit 1.44): when a client that wrote and
# never flushed disconnects, the plugin gets one flush, after the last
# write and before the connection's close (the log filter below the fua
# filter sees it).  Without it, no flush; with fua-mode=discard the
# client's own flushes are dropped but the one at close still comes; a
# read-only client gets none.  fua-mode= is the newer spelling of
# fuamode=.  A plugin whose flush fails makes the server log the error.
# The fua_flush_on_close probe is checked in test-fua-filter-probes.sh.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

log="$tmpdir/log"

# run ARGS...: one client writes twice (and flushes if FLUSH=1), then
# hangs up; prints the log's request lines, one word each.
run ()
{
  rm -f "$log"
  t "$NBDKIT" -U - "$@" --run 'nbdsh -u "$uri" -c "
import os
if not h.is_read_only():
    h.pwrite(b\"a\" * 4096, 0)
    if os.environ.get(\"FLUSH\") == \"1\":
        h.flush()
    h.pwrite(b\"b\" * 4096, 4096)
h.pread(512, 0)
h.shutdown()
"' || fail "nbdkit $* failed"
  # "connection=1 Write id=1 ..." -> "Write"; the replies are left out.
  sed -n 's/.*connection=[0-9]* \([A-Z][a-z]*\) .*/\1/p' "$log" |
    grep -v '^Connect$' | tr '\n' ' '
}

expect ()
{
  local want="$1" got
  shift
  got="$(run "$@")"
  [ "$got" = "$want" ] || fail "$*: log '$got', expected '$want'"
  echo "$*: $got"
}

f=(--filter=fua --filter=log memory 1M logfile="$log")
expect "Write Write Read Flush Disconnect " "${f[@]}" flush-on-close=true
expect "Write Write Read Disconnect " "${f[@]}"
expect "Write Write Read Disconnect " "${f[@]}" flush-on-close=false
# The client's flush goes through, and one more comes at close.
FLUSH=1 expect "Write Flush Write Read Flush Disconnect " "${f[@]}" \
  flush-on-close=true
# discard drops the client's flush, not the one at close.
FLUSH=1 expect "Write Write Read Flush Disconnect " "${f[@]}" \
  fua-mode=discard flush-on-close=1
FLUSH=1 expect "Write Write Read Disconnect " "${f[@]}" fuamode=discard
# Nothing to flush for a reader.
expect "Read Disconnect " -r "${f[@]}" flush-on-close=true

# A flush that fails: the server says so (an eval plugin whose flush
# exits with EIO).
t "$NBDKIT" -U - --filter=fua eval get_size='echo 1048576' \
  pread='dd if=/dev/zero bs=$3 count=1 2>/dev/null' pwrite='cat >/dev/null' \
  can_write='exit 0' can_flush='exit 0' flush='echo EIO flush broke >&2; exit 1' \
  flush-on-close=true \
  --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\" * 512, 0)"' 2> "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "server with a failing flush failed"; }
cat "$tmpdir/err"
grep -q "fua.*error: flush-on-close: flush failed: Input/output error" \
  "$tmpdir/err" || fail "no error for the failed flush"

refuses "flush-on-close" --filter=fua memory 1M flush-on-close=maybe ||
  fail "flush-on-close=maybe accepted"
refuses "fua-mode: unknown mode 'sometimes'" --filter=fua memory 1M \
  fua-mode=sometimes || fail "fua-mode=sometimes accepted"
