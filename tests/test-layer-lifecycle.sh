#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A context's life through two filters (tests/trace-filter.c, built as
# trace1 over trace2) over memory: finalize runs only on layers that
# were prepared, every finalize before any close, and close on every
# layer that was opened:
#   - a clean connection: open and prepare from the inside out,
#     finalize and close from the outside in;
#   - trace1's open fails after opening trace2: trace2 is closed and
#     never prepared nor finalized;
#   - trace1's prepare fails: trace2 (prepared) is finalized, trace1 is
#     not, and both are closed.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

t1="$abs_builddir/.libs/trace1-filter.so"
t2="$abs_builddir/.libs/trace2-filter.so"
[ -f "$t1" ] && [ -f "$t2" ] || fail "trace filters not built (make check)"

# run FAIL-AT: the trace lines of one connection.
run ()
{
  t "$NBDKIT" -U - --filter="$t1" --filter="$t2" memory 1M \
    trace1-fail="$1" --run 'nbdinfo --size "$uri" || :' \
    2> "$tmpdir/err" > /dev/null || :
  grep '^trace: ' "$tmpdir/err" | grep -v ' shadow=' | cut -d' ' -f2- \
    > "$tmpdir/got"
}

expect ()
{
  if ! diff -u - "$tmpdir/got"; then
    cat "$tmpdir/err"
    fail "$1"
  fi
}

run none
expect "the lifecycle of a clean connection is wrong" <<'END'
trace2 open
trace1 open
trace2 prepare
trace1 prepare
trace1 finalize
trace2 finalize
trace1 close
trace2 close
END

run open
expect "a failed open was not undone by close alone" <<'END'
trace2 open
trace1 open
trace2 close
END

run prepare
expect "a failed prepare was finalized, or a prepared layer was not" <<'END'
trace2 open
trace1 open
trace2 prepare
trace1 prepare
trace2 finalize
trace1 close
trace2 close
END
