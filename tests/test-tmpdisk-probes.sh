#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tmpdisk plugin's probe: tmpdisk_command fires once per connection
# with the command text, how long it ran and its exit status, also for
# a command that fails.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh nbdinfo
requires_root
tracing_lock

so="$abs_top_builddir/plugins/tmpdisk/.libs/nbdkit-tmpdisk-plugin.so"
[ -f "$so" ] || fail "$so not built"
export TMPDIR="$tmpdir"

# The command sleeps 0.2 s, so its duration is known from below.  A
# client connecting with export name "fail" makes it exit 7.
start_server tmpdisk 1M command='sleep 0.2
truncate -s $size "$disk"
[ "$(cat '"$tmpdir"'/fail 2>/dev/null)" != yes ] || exit 7'
trace_start "$tmpdir/bt" \
  "usdt:$so:nbdkit:tmpdisk_command {
     printf(\"cmd %d %d [%s]\\n\", arg2, arg1 / 1000000, str(arg0, 32));
   }"
t nbdinfo --size "$uri" > /dev/null || fail "first client failed"
t nbdinfo --size "$uri" > /dev/null || fail "second client failed"
echo yes > "$tmpdir/fail"
expect_fail t nbdinfo --size "$uri" 2>/dev/null ||
  fail "a client connected although the command failed"
trace_stop
cat "$tmpdir/bt"

grep '^cmd ' "$tmpdir/bt" > "$tmpdir/events" || :
[ "$(wc -l < "$tmpdir/events")" -eq 3 ] ||
  fail "expected 3 tmpdisk_command events, got $(wc -l < "$tmpdir/events")"
[ "$(grep -c '^cmd 0 ' "$tmpdir/events")" -eq 2 ] ||
  fail "expected 2 events with status 0"
grep -q '^cmd 7 ' "$tmpdir/events" || fail "no event with status 7"
awk '$3 < 200 || $3 > 20000 { exit 1 }' "$tmpdir/events" ||
  fail "durations not between 0.2 s and 20 s"
grep -qF '[sleep 0.2' "$tmpdir/events" || fail "the command text is wrong"
