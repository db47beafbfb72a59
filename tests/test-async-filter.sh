#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin with asynchronous callbacks (example-async) under filters.
# The example-async plugin reports, when a connection closes, how many
# requests it was handed asynchronously.
#  - offset, which exports nbdkit_async_filter_ops: the requests are
#    shifted and handed over, and the bytes land where they should;
#  - nozero zeromode=emulate, which has only zero callbacks: reads,
#    writes and flushes pass through it untouched and are handed over,
#    zeroes are written by the filter, synchronously;
#  - log, which handles every request itself (a synchronous filter
#    above an asynchronous plugin): nothing is handed over, and the
#    bytes are right all the same;
#  - noparallel, whose thread model serialises requests: nothing;
#  - -D nbdkit.async=0: nothing, on a stack that would.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

check='
h.pwrite(b"abc" * 1000, 4096)
assert h.pread(3000, 4096) == b"abc" * 1000
h.zero(1000, 4096)
assert h.pread(1000, 4096) == bytes(1000)
h.flush()
'
# run_check NAME ARGS...: the check above against nbdkit ARGS, log kept.
run_check ()
{
  local name="$1"
  shift
  t "$NBDKIT" -v -U - "$@" --run 'nbdsh -u "$uri" -c '"'$check'" \
    2> "$tmpdir/log" || { cat "$tmpdir/log"; fail "$name"; }
  grep 'close:' "$tmpdir/log"
}

# The offset filter shifts asynchronous requests too: the bytes written
# through it are 1 MiB further into the plugin.
t "$NBDKIT" -v -U - --filter=offset example-async size=2M offset=1M \
  delay=1 --run 'nbdsh -u "$uri" -c '"'$check'"'
                 nbdsh -u "$uri" -c "assert h.pread(3, 5096) == b\"bca\""' \
  2> "$tmpdir/log" || { cat "$tmpdir/log"; fail "through the offset filter"; }
grep 'close:' "$tmpdir/log"
grep -q 'close: 5 requests submitted, 5 completed' "$tmpdir/log" ||
  fail "the offset filter did not pass the requests on asynchronously"
# The filter's layer is traced with its own coordinates, as on the
# synchronous path.
grep -q 'offset\[1\]: debug: pwrite count=3000 offset=4096' "$tmpdir/log" &&
  grep -q 'example-async\[1\]: debug: pwrite count=3000 offset=1052672' \
    "$tmpdir/log" || fail "the layers' calls were not traced"

run_check "through nozero" --filter=nozero example-async zeromode=emulate \
  delay=1
grep -q 'close: 4 requests submitted, 4 completed' "$tmpdir/log" ||
  fail "nozero: reads, writes and flush should be handed over, zero not"

run_check "under log" --filter=log example-async \
  logfile="$tmpdir/requests.log" delay=1
grep -q 'close: 0 requests submitted, 0 completed' "$tmpdir/log" ||
  fail "requests were handed asynchronously through the log filter"
grep -q 'Write .*offset=0x1000 count=0xbb8' "$tmpdir/requests.log" ||
  { cat "$tmpdir/requests.log"; fail "the log filter did not see the write"; }

run_check "under noparallel" --filter=noparallel example-async delay=1
grep -q 'close: 0 requests submitted' "$tmpdir/log" ||
  fail "requests were handed asynchronously under a serialising model"

run_check "without a filter" example-async delay=1
grep -q 'close: 5 requests submitted, 5 completed' "$tmpdir/log" ||
  fail "without a filter, the requests were not handed over"

run_check "with -D nbdkit.async=0" -D nbdkit.async=0 --filter=offset \
  example-async delay=1
grep -q 'close: 0 requests submitted' "$tmpdir/log" ||
  fail "-D nbdkit.async=0 did not turn the asynchronous path off"
