#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A plugin whose open fails, or takes a long time, costs that
# connection only.  One server, the fault plugin (open fails for export
# "fail-open" and takes 3 s for "slow-open"):
#   - a client of "fail-open" is refused, with the plugin's message in
#     the server's log, and the server keeps running;
#   - while a client of "slow-open" waits, another client connects,
#     writes and reads back before that open has finished;
#   - the slow client then gets its connection and works too;
#   - a client of "crash-open", where the plugin's open takes a real
#     SIGSEGV, fails alone when the server runs with
#     -D nbdkit.open.contain_crashes=1: the crash is logged and the
#     server goes on; without the flag the server dies of it, as nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

plugin="$abs_builddir/.libs/fault-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"
log="$tmpdir/calls"
: > "$log"
start_server -D nbdkit.open.contain_crashes=1 "$plugin" delay-ms=3000 \
  log="$log" 2> "$tmpdir/server.err"
base="nbd+unix://"
q="?socket=$sock"

if t nbdsh -u "$base/fail-open$q" -c 'pass' 2> "$tmpdir/refused.err"; then
  fail "a client of fail-open was served"
fi
grep -q 'open refused for export "fail-open"' "$tmpdir/server.err" ||
  { cat "$tmpdir/server.err"; fail "the open failure was not logged"; }
kill -0 "$server_pid" || fail "the server died when open failed"

t nbdsh -u "$base/slow-open$q" -c '
h.pwrite(b"slow", 0)
assert h.pread(4, 0) == b"slow"
print("slow client: served")
' > "$tmpdir/slow.out" 2>&1 &
slow=$!
cleanup_fn _kill_pid "$slow"
wait_for_output "$log" '^open$' "$slow" || fail "slow open never started"
sleep 0.2                       # the slow open is under way

t nbdsh -u "$uri" -c '
h.pwrite(b"quick", 4096)
assert h.pread(5, 4096) == b"quick"
' || fail "a normal client failed while another open was slow"
grep -q '^open-done$' "$log" &&
  fail "the normal client was only served after the slow open finished"

status=0
wait "$slow" || status=$?
cat "$tmpdir/slow.out"
[ "$status" -eq 0 ] || fail "the slow-open client failed ($status)"
grep -q '^open-done$' "$log" || fail "no open-done in the log"

# Still serving after all that.
t nbdsh -u "$uri" -c 'assert h.pread(4, 0) == b"slow"'

# A plugin that crashes (SIGSEGV) in open: that connection fails, the
# server says why, and keeps serving; twice, so the containment holds
# after it has been used once.
for i in 1 2; do
  if t nbdsh -u "$base/crash-open$q" -c 'pass' 2> "$tmpdir/crash.err"; then
    fail "a client of crash-open was served"
  fi
  kill -0 "$server_pid" || fail "the server died when the plugin crashed in open"
  t nbdsh -u "$uri" -c 'assert h.pread(4, 0) == b"slow"' ||
    fail "not serving after a crash in open"
done
[ "$(grep -c 'crashed in open (signal 11' "$tmpdir/server.err")" -eq 2 ] ||
  { cat "$tmpdir/server.err"; fail "the crashes in open were not logged"; }
grep 'crashed in open' "$tmpdir/server.err" | head -1

# Without the flag, a crash in open ends the server by SIGSEGV, as in
# nbdkit: nothing the crashed open held is left held in a live server.
sock2=$tmpdir/plain.sock
# Under AddressSanitizer the signal is left to kill the process
# (handle_segv=0), so that no sanitizer report is written for a crash
# this test causes on purpose.
(ulimit -c 0
 export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
 exec "$NBDKIT" -f -U "$sock2" "$plugin" 2> "$tmpdir/plain.err") &
plain=$!
cleanup_fn _kill_pid "$plain"
wait_for 20 -S "$sock2" || fail "the second server did not start"
t nbdsh -u "nbd+unix:///crash-open?socket=$sock2" -c 'pass' 2>/dev/null &&
  fail "a client of crash-open was served without the flag"
for _ in $(seq 100); do kill -0 "$plain" 2>/dev/null || break; sleep 0.1; done
kill -0 "$plain" 2>/dev/null && fail "the server outlived a crash in open"
status=0
wait "$plain" || status=$?
if [ "$status" -ne $((128 + 11)) ]; then
  cat "$tmpdir/plain.err"
  fail "expected death by SIGSEGV, got status $status"
fi
grep -q 'crashed in open' "$tmpdir/plain.err" &&
  fail "the crash was contained without the flag"
echo "without the flag: the server died of the crash (status $status)"
