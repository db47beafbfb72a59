#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The log probe's origin after a filter passed a call on.  The origin
# filter (tests/origin-filter.c) logs right after its next_config and
# next_config_complete returned: its messages must say "origin", not
# "memory" (the plugin whose callback ran last: the layer name used to
# be left set after the configuration-time calls), and the server's own
# messages after them must say "nbdkit".  Would catch: a configuration-
# time layer call that does not put the thread's layer name back.
source "$(dirname "$0")/functions.sh"
requires_tracer

filter="$abs_builddir/.libs/origin-filter.so"
[ -f "$filter" ] || fail "$filter was not built"

b="$server_binary"
start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" -e "usdt:$b:nbdkit:log {
  printf(\"%llu %d log|%s|%s|%s\n\", nsecs, pid, str(arg1), str(arg5),
         str(arg2));
}"

t "$NBDKIT" -U - --filter="$filter" memory 1M --run true
sleep 1
interrupt_tracer "$bt"
grep -E '^[0-9]+ ' "$tmpdir/out" | sort -n -k1,1 | cut -d' ' -f3- \
  > "$tmpdir/got"
cat "$tmpdir/got"

grep -q '^log|origin|[^|]*|origin-test: after next_config size$' \
  "$tmpdir/got" || fail "the message after next_config is not the filter's"
grep -q '^log|origin|[^|]*|origin-test: after next_config_complete$' \
  "$tmpdir/got" ||
  fail "the message after next_config_complete is not the filter's"
grep -q '^log|nbdkit|server/main\.c:[0-9]*|stopping: run-exited$' \
  "$tmpdir/got" || fail "the server's last message is not the server's"
