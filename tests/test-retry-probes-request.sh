#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A retry is charged to the request it retries: with the retry filter
# over the retry-request filter (one retry) over a plugin whose first
# two data calls fail and whose later ones work, bpftrace attached to
# that one server (-p) sees retry_request_attempt, then retry_attempt
# and retry_reopen, each with the connection id and cookie of the
# server's request_start of the read that failed (command 0,
# NBD_CMD_READ).  A block status request (which the plugin does not
# see) goes first and a second read after, so a probe with a stale or
# a later cookie, or with none, would not join.  Only arg0 and arg1 (id, cookie) and arg2 (the
# command) of request_start are read.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
flaky="$abs_builddir/.libs/flaky-plugin.so"
[ -f "$flaky" ] || fail "$flaky was not built"

# The probes of both filters print "retry ID COOKIE COMMAND PROBE".
start_server --filter=retry --filter=retry-request "$flaky" fail=2 \
  retry-delay=1 retry-request-retries=1 retry-request-delay=1
prog="
usdt:$server_binary:nbdkit:request_start {
  printf(\"%lld start %d %d %d\\n\", nsecs, arg0, arg1, arg2); }
usdt:$server_binary:nbdkit:connection_close {
  printf(\"%lld close %d\\n\", nsecs, arg0); }"
for p in retry:retry_attempt retry:retry_reopen \
         retry-request:retry_request_attempt; do
  prog+="
usdt:$(filter_so "${p%%:*}"):nbdkit:${p#*:} {
  printf(\"%lld retry %d %d %s ${p#*:}\\n\", nsecs, arg0, arg1, str(arg2)); }"
done
trace_start "$tmpdir/out" "$prog"
t nbdsh --base-allocation -u "$uri" \
  -c 'h.block_status(512, 0, lambda *args: 0)' \
  -c 'assert h.pread(512, 0) == bytes(512)' \
  -c 'assert h.pread(512, 512) == bytes(512)'
trace_stop_at_close

# $tmpdir/got has three request_starts (block status, read, read) and
# the retry probes, once each and in this order, each with the id and
# cookie of the first read (neither 0) and command "pread".
/usr/bin/python3 - "$tmpdir/got" retry_request_attempt retry_attempt \
  retry_reopen <<'PY' || fail "the retry probes do not join request_start"
import sys
lines = [l.split() for l in open(sys.argv[1])]
starts = [l[1:] for l in lines if l[0] == "start"]
retries = [l[1:] for l in lines if l[0] == "retry"]
if [s[2] for s in starts] != ["7", "0", "0"]:
    sys.exit("request_start commands: %s" % starts)
read = starts[1][:2]
if read[0] == "0" or read[1] == "0":
    sys.exit("request_start of the read has id or cookie 0: %s" % read)
if [r[3] for r in retries] != sys.argv[2:]:
    sys.exit("retry probes %s, want %s" % (retries, sys.argv[2:]))
for r in retries:
    if r[:2] != read or r[2] != "pread":
        sys.exit("retry probe %s does not join request_start %s" % (r, read))
PY
