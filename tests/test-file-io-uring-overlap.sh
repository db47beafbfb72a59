#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin with direct=true aio=io_uring takes reads, writes and flushes on
# the asynchronous path and does them through io_uring: under bpftrace,
# request_submit and request_complete pair up for each of them, many
# are in flight at once (64 reads sent together, and the server's 2
# threads would never have more than a few), each completes on another
# thread than the one that submitted it (the ring's completion
# thread), and the kernel's io_uring_submit_req tracepoint fires in the
# server for each.  With aio=threads neither the probes nor the
# tracepoint fire.
source "$(dirname "$0")/functions.sh"
requires_tracer /usr/bin/python3
source "$(dirname "$0")/file-io-uring-setup.sh"
head -c $(( 64 * 1048576 )) /dev/urandom > "$dir/disk"

cat > "$tmpdir/client.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(b"w" * 4096, 0)
h.flush()
bufs = [nbd.Buffer(65536) for i in range(64)]
cookies = [h.aio_pread(b, i * 1048576) for i, b in enumerate(bufs)]
for c in cookies:
    while not h.aio_command_completed(c):
        h.poll(-1)
h.shutdown()
PY

b="$server_binary"
cat > "$tmpdir/trace.bt" <<BT
usdt:$b:nbdkit:request_submit {
  printf("%llu submit %d %d %d %d\n", nsecs, arg0, arg1, arg2, tid);
}
usdt:$b:nbdkit:request_complete {
  printf("%llu complete %d %d %d %d\n", nsecs, arg0, arg1, arg2, tid);
}
tracepoint:io_uring:io_uring_submit_req /comm != "bpftrace"/ {
  printf("%llu uring %d\n", nsecs, pid);
}
BT
start_bpftrace 60 "$tmpdir/out" "$tmpdir/err" "$tmpdir/trace.bt"

start_server file "$dir/disk" direct=true aio=io_uring
uring_pid=$server_pid
t /usr/bin/python3 "$tmpdir/client.py" "$uri"
stop_server
start_server file "$dir/disk" direct=true aio=threads
threads_pid=$server_pid
t /usr/bin/python3 "$tmpdir/client.py" "$uri"
stop_server
sleep 1
interrupt_tracer "$bt"
trace_in_order "$tmpdir/out" > "$tmpdir/sorted"

# The first server: connection id 1 of its own; the second too, so
# tell them apart by the tracepoint's pid and by order: every probe of
# the first comes before any of the second.
awk -v up="$uring_pid" -v tp="$threads_pid" '
  $1 == "uring" { if ($2 == up) nu++; if ($2 == tp) nt++ }
  $1 == "submit" { k = $2 " " $3; s[k] = $5; cmd[k] = $4; n++
                   if (++inflight > max) max = inflight }
  $1 == "complete" { k = $2 " " $3
                     if (!(k in s)) { print "complete without submit: " k; bad = 1 }
                     else if ($5 == s[k]) { print "completed on the submitting thread: " k; bad = 1 }
                     if ($4 != 0) { print "error " $4 ": " k; bad = 1 }
                     inflight--; m++; delete s[k] }
  END {
    printf "%d submits, %d completes, at most %d in flight; " \
           "io_uring submissions: %d (direct), %d (threads)\n", n, m, max, nu, nt
    for (k in s) { print "never completed: " k; bad = 1 }
    # The write, the flush and the 64 reads.
    if (n != 66 || m != 66) { print "want 66 requests on the async path"; bad = 1 }
    if (max < 16) { print "too few in flight at once"; bad = 1 }
    if (nu < 66) { print "fewer io_uring submissions than requests"; bad = 1 }
    if (nt != 0) { print "aio=threads used io_uring"; bad = 1 }
    exit bad
  }' "$tmpdir/sorted" || {
  cat "$tmpdir/sorted" | head -200
  fail "the io_uring path was not taken, or its requests did not overlap"
}
