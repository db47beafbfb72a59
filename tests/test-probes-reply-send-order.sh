#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# reply_send fires just before the write that carries the reply, under
# the write lock (docs/nbdkit-probes.pod), also for replies held back
# to go out together while the client keeps sending.  A client sends
# rounds of 8 reads in one write: the server holds the first replies of
# a round back and sends the round's replies in one sendmsg.  Under
# bpftrace, between a reply_send and the sendmsg that follows it only
# other reply_sends may come (no request_start: a held reply's probe
# must not fire when it is held), and some sendmsg carries several.
source "$(dirname "$0")/functions.sh"
requires_tracer

start_server memory 1M
pid="$(cat "$pidfile")"

start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" -e "
usdt:$server_binary:nbdkit:request_start /pid == $pid/
  { printf(\"%lld start %d\\n\", nsecs, arg1); }
usdt:$server_binary:nbdkit:reply_send /pid == $pid/
  { printf(\"%lld reply %d\\n\", nsecs, arg1); }
tracepoint:syscalls:sys_enter_sendmsg /pid == $pid/
  { printf(\"%lld send\\n\", nsecs); }"

t /usr/bin/python3 - "$sock" "$abs_top_srcdir/tests/hostile-client.py" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hostile", sys.argv[2])
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)
c = hc.Conn(sys.argv[1]).open()
reqs = {i: hc.Req(hc.CMD_READ, 0, 512) for i in range(8)}
for r in range(40):
    c.send(b"".join(c.header(hc.CMD_READ, 4096 * i, 512, cookie=i)
                    for i in range(8)))
    for i in range(8):
        rep = c.reply(reqs)
        assert rep.error == 0 and len(rep.data) == 512, rep.error
c.disc()
PY
sleep 1
interrupt_tracer "$bt"

# Events in time order (bpftrace's per-CPU buffers need not be).
sort -n -k1,1 "$tmpdir/out" | awk '$2 ~ /^(start|reply|send)$/' \
  > "$tmpdir/events"
[ "$(grep -c ' reply ' "$tmpdir/events")" -eq 320 ] ||
  fail "expected 320 reply_send, saw $(grep -c ' reply ' "$tmpdir/events")"
awk '
  $2 == "reply" { run++; next }
  $2 == "send" { if (run > most) most = run; run = 0; next }
  $2 == "start" && run > 0 {
    print "request_start after a reply_send, before its write: line " NR
    bad = 1; exit 1
  }
  END {
    if (bad) exit 1
    if (run > 0) { print "reply_send with no write after it"; exit 1 }
    if (most < 2) { print "no write carried held replies"; exit 1 }
    print "most replies in one write: " most
  }' "$tmpdir/events" ||
  fail "reply_send out of step with the writes (see $tmpdir/events)"
