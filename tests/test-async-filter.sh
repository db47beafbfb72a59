#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin with asynchronous callbacks under a synchronous filter (the
# offset filter): the server takes today's synchronous path, so the
# asynchronous callbacks are never called (the example-async plugin
# reports how many requests it was handed when a connection closes:
# none), and the bytes go where the filter puts them.  Without the
# filter the same requests are handed over.  A thread model that
# serialises requests (the noparallel filter) is also synchronous.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

check='
h.pwrite(b"abc" * 1000, 4096)
assert h.pread(3000, 4096) == b"abc" * 1000
h.zero(1000, 4096)
assert h.pread(1000, 4096) == bytes(1000)
h.flush()
'
t "$NBDKIT" -v -U - --filter=offset example-async size=2M offset=1M \
  delay=1 --run 'nbdsh -u "$uri" -c '"'$check'"'
                 nbdsh -u "$uri" -c "assert h.pread(3, 5096) == b\"bca\""' \
  2> "$tmpdir/log" || { cat "$tmpdir/log"; fail "through the offset filter"; }
grep 'close:' "$tmpdir/log"
[ "$(grep -c 'close: 0 requests submitted, 0 completed' "$tmpdir/log")" -eq 2 ] ||
  fail "requests were handed asynchronously through a filter"

t "$NBDKIT" -v -U - --filter=noparallel example-async delay=1 \
  --run 'nbdsh -u "$uri" -c '"'$check'" 2> "$tmpdir/log" ||
  { cat "$tmpdir/log"; fail "under noparallel"; }
grep -q 'close: 0 requests submitted' "$tmpdir/log" ||
  fail "requests were handed asynchronously under a serialising model"

t "$NBDKIT" -v -U - example-async delay=1 \
  --run 'nbdsh -u "$uri" -c '"'$check'" 2> "$tmpdir/log" ||
  { cat "$tmpdir/log"; fail "without a filter"; }
grep 'close:' "$tmpdir/log"
grep -q 'close: 5 requests submitted, 5 completed' "$tmpdir/log" ||
  fail "without a filter, the requests were not handed over"

# -D nbdkit.async=0 turns the asynchronous path off for the same stack.
t "$NBDKIT" -v -D nbdkit.async=0 -U - example-async delay=1 \
  --run 'nbdsh -u "$uri" -c '"'$check'" 2> "$tmpdir/log" ||
  { cat "$tmpdir/log"; fail "with -D nbdkit.async=0"; }
grep -q 'close: 0 requests submitted' "$tmpdir/log" ||
  fail "-D nbdkit.async=0 did not turn the asynchronous path off"
