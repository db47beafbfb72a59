#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-latency.bt (through tools/nbdkit-trace -p PID): a client
# sends exactly 10 reads, 5 writes and 1 read past the end (refused at
# the edge, never dispatched).  On ^C the histograms must hold exactly:
# requests read 11, write 5; errors read 1 (named EINVAL); queue and
# layer read 10
# (the refused read never reaches a layer), send and total read 11;
# queue, layer, send, total write 5.
# At ^C the view prints its maps with one blank line between blocks:
# none of the runs bpftrace 0.17 prints for the maps END emptied, and
# none at the end.  nbdkit-trace --help and --version answer on stdout
# and exit 0.
# EXPECT_READS overrides the expected dispatched read count.
source "$(dirname "$0")/functions.sh"
trace="$abs_top_srcdir/tools/nbdkit-trace"

"$trace" --help > "$tmpdir/help" || fail "nbdkit-trace --help failed"
grep -q '^usage: nbdkit-trace -p PID' "$tmpdir/help" ||
  fail "nbdkit-trace --help printed no usage"
version="$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
             "$abs_top_builddir/config.h")"
[ "$("$trace" --version)" = "nbdkit-trace (nbdkit) $version" ] ||
  fail "nbdkit-trace --version does not print $version"

requires_tracer nbdsh
expect_reads="${EXPECT_READS:-10}"

start_server memory 64M
out="$tmpdir/out"
start_tool "$out" '^Tracing' \
  "$trace" -p "$server_pid" latency

t nbdsh -u "$uri" -c "$tool_test_io"
sleep 0.5
interrupt_tracer "$tool"
cat -A "$out"
awk 'NF == 0 { if (blank) twice = 1; blank = 1; next } { blank = 0 }
     END { exit !(twice || blank) }' "$out" &&
  fail "blank lines in a row or at the end of the view's output"

# Sum a histogram's bucket counts: hist MAP KEY
hist ()
{
  awk -v want="@$1[$2]:" '
    $1 == want { on = 1; next }
    on && /^\[/ { sub(/^\[[^])]*[])] */, ""); n += $1; next }
    on && !/^\[/ { on = 0 }
    END { print n + 0 }' "$out"
}
# A count: count MAP KEY
count ()
{
  awk -v want="@$1[$2]:" 'index($0, want " ") == 1 { n = $NF }
                          END { print n + 0 }' "$out"
}
check ()
{
  [ "$2" -eq "$3" ] || fail "$1: expected $3, saw $2"
}
check "requests read" "$(count requests read)" 11
check "requests write" "$(count requests write)" 5
check "errors read" "$(grep -c '^@errors\[read, ' "$out")" 1
check "errors read EINVAL" "$(count errors 'read, EINVAL')" 1
check "errors write" "$(grep -c '^@errors\[write, ' "$out")" 0
check "queue read" "$(hist queue_ns read)" "$expect_reads"
check "layer read" "$(hist layer_ns read)" "$expect_reads"
check "send read" "$(hist send_ns read)" 11
check "total read" "$(hist total_ns read)" 11
for m in queue_ns layer_ns send_ns total_ns; do
  check "$m write" "$(hist $m write)" 5
done
