#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# request_submit and request_complete fire under bpftrace for requests
# handed to an asynchronous plugin (nbdkit-async(3)), with matching
# (id, cookie): each submit has one complete, with the error the plugin
# completed it with, after request_dispatch and before the request's
# reply_send, and on another thread than the submit (the plugin's timer
# thread: the completion from another thread).  Through a synchronous
# filter (log), neither fires.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_dispatch { printf("%llu dispatch %d %d\n", nsecs, arg0, arg1); }
usdt:$b:nbdkit:request_submit {
  printf("%llu submit %d %d %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3, arg4, tid);
}
usdt:$b:nbdkit:request_complete {
  printf("%llu complete %d %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3, tid);
}
usdt:$b:nbdkit:reply_send { printf("%llu reply %d %d\n", nsecs, arg0, arg1); }
BT
timeout -k 120 60 bpftrace "$tmpdir/trace.bt" > "$tmpdir/out" 2>"$tmpdir/err" &
bt=$!
cleanup_fn _kill_pid "$bt"
wait_for_bpftrace "$bt" "$tmpdir/out" "$tmpdir/err"

t "$NBDKIT" -U - example-async size=1M delay=20 fail=65536 --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"a\" * 4096, 8192)
assert h.pread(4096, 8192) == b\"a\" * 4096
try:
    h.pread(512, 65536)
    assert False
except nbd.Error:
    pass
h.flush()
"'
t "$NBDKIT" -U - --filter=log example-async logfile="$tmpdir/log" delay=1 \
  --run 'nbdsh -u "$uri" -c "h.pread(512, 0)"'
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
mv "$tmpdir/sorted" "$tmpdir/out"
cat "$tmpdir/out"

# Four submits (write, read, failing read, flush) on the first
# connection, none on the second.
[ "$(grep -c '^submit ' "$tmpdir/out")" -eq 4 ] ||
  fail "not 4 request_submit"
[ "$(grep -c '^complete ' "$tmpdir/out")" -eq 4 ] ||
  fail "not 4 request_complete"
awk '
  $1 == "dispatch" { d[$2 " " $3] = NR }
  $1 == "submit" { k = $2 " " $3; s[k] = NR; st[k] = $7; cmd[k] = $4
                   if (!(k in d) || d[k] > NR) { print "submit before dispatch: " k; bad = 1 } }
  $1 == "complete" { k = $2 " " $3
                     if (!(k in s)) { print "complete without submit: " k; bad = 1 }
                     if (k in c) { print "completed twice: " k; bad = 1 }
                     c[k] = NR; err[k] = $4
                     if ($6 == st[k]) { print "completed on the submitting thread: " k; bad = 1 } }
  $1 == "reply" { k = $2 " " $3
                  if ((k in s) && !(k in c)) { print "reply before complete: " k; bad = 1 } }
  END {
    for (k in s) if (!(k in c)) { print "never completed: " k; bad = 1 }
    nerr = 0
    for (k in err) if (err[k] != 0) { nerr++; if (err[k] != 5 || cmd[k] != 0) bad = 1 }
    if (nerr != 1) { print "want one read failing with EIO (5)"; bad = 1 }
    exit bad
  }' "$tmpdir/out" || fail "request_submit and request_complete do not pair"
