#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-user.bt, run as `nbdkit-trace -p PID user', prints the
# generic probe by name: an eval plugin fires `nbdkit-probe' in open
# (outside a request) and in each of 3 reads; the view must print one
# line for each, with the connection id, the cookie, the request's
# command ("-" in open, "read" for the reads), the name, both integers
# (a negative one too) and the text, and count 3 firings of the read's
# name at the end; for a binary without the probe it refuses plainly.
# It would catch: a view that drops or misnames them, loses the sign,
# or fails to join the request's command.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

start_server eval get_size='echo 1M' \
  open='nbdkit-probe viewopen -1 2 "hello view"; echo h' \
  pread='nbdkit-probe viewread "$4" "$3" "at $4" &&
         dd if=/dev/zero count="$3" iflag=count_bytes 2>/dev/null'
out="$tmpdir/out"
start_tool "$out" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" user
t nbdsh -u "$uri" -c 'for i in range(3): h.pread(512, i * 65536)' ||
  fail "nbdsh failed"
for (( i = 0; i < 50; i++ )); do
  [ "$(grep -c viewread "$out")" -ge 3 ] && break
  sleep 0.1
done
interrupt_tracer "$tool"
cat "$out"

# Columns: TIME CONN COOKIE REQUEST NAME ARG1 ARG2 TEXT
awk '$1 ~ /^[0-9]+$/ && $4 == "-" && $5 == "viewopen" && $6 == -1 &&
     $7 == 2 && $8 == "hello" && $9 == "view" && $2 > 0 && $3 == 0' \
  "$out" | grep -q . || fail "no line for viewopen (-, -1, 2, hello view)"
for i in 0 1 2; do
  off=$(( i * 65536 ))
  awk -v off="$off" '$1 ~ /^[0-9]+$/ && $4 == "read" && $5 == "viewread" &&
      $6 == off && $7 == 512 && $8 == "at" && $9 == off && $3 > 0' \
    "$out" | grep -q . || fail "no line for the read at $off"
done
grep -q '^@fired\[viewread\]: 3$' "$out" || fail "viewread not counted 3 times"
# A server without the probe (here a binary with no notes at all):
# a plain refusal, not bpftrace's attach error.
if "$abs_top_srcdir/tools/nbdkit-trace" -x /bin/true user \
     > "$tmpdir/old.out" 2>&1; then
  fail "nbdkit-trace user accepted a binary without the user probe"
fi
cat "$tmpdir/old.out"
grep -q 'has no probe "user"' "$tmpdir/old.out" ||
  fail "nbdkit-trace user did not say the binary lacks the probe"
echo "OK: nbdkit-trace user shows the generic probe by name"
