#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# limit_refused fires under bpftrace, once per refused client, with the
# number of clients being served and the limit: with limit=2 and two
# clients holding on, two more are refused, each seen as (2, 2).
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh nbdinfo
tracing_lock

so="$(filter_so limit)"
start_server --filter=limit memory 1M limit=2
for c in a b; do
  nbdsh -u "$uri" -c "
import os, time
open('$tmpdir/$c.up', 'w').close()
for i in range(300):
    if os.path.exists('$tmpdir/go'):
        break
    time.sleep(0.1)
" &
  cleanup_fn _kill_pid $!
  wait_for 20 -f "$tmpdir/$c.up" || fail "client $c did not connect"
done
trace_start "$tmpdir/trace" \
  "usdt:$so:nbdkit:limit_refused { printf(\"refused %d %d\\n\", arg0, arg1); }"
expect_fail t nbdinfo --size "$uri" 2> /dev/null
expect_fail t nbdinfo --size "$uri" 2> /dev/null
trace_stop
touch "$tmpdir/go"
cat "$tmpdir/trace"
[ "$(grep -cx 'refused 2 2' "$tmpdir/trace")" -eq 2 ] ||
  fail "expected limit_refused (2, 2) twice"
[ "$(grep -c '^refused' "$tmpdir/trace")" -eq 2 ] ||
  fail "limit_refused fired for other clients too"
