#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Probes' string arguments reach the tracer even when the page holding
# the string was never touched by the server.  bpftrace reads a string
# from inside the kernel, where a page fault cannot be served, so a
# literal such as the log probe's level "debug" or origin "nbdkit" in a
# page that is not mapped in the serving process reads as "".
# The server and the memory plugin run from private copies; once the
# server is up, the copies' pages that no process maps are dropped from
# the page cache (sync, then POSIX_FADV_DONTNEED), as memory pressure
# would drop them.  Then bpftrace prints the string arguments of the
# log, connection_accept, handshake_option, layer_call_start/done,
# reply_send and connection_close probes while nbdsh reads, and every
# string must be the one the server passed.  Twice: in the foreground
# (-f) and daemonised (fork leaves file mappings out of the child's page
# tables).
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh sync
requires test -x /usr/bin/python3
requires_root
requires_probes
tracing_lock

bin="$tmpdir/nbdkit"
plugindir="$tmpdir/plugins"
mkdir -p "$plugindir"
cp "$server_binary" "$bin"
so="$abs_top_builddir/plugins/memory/.libs/nbdkit-memory-plugin.so"
[ -f "$so" ] || fail "$so not built"
cp "$so" "$plugindir/"
bin="$(readlink -f "$bin")"
export NBDKIT_PLUGINDIR="$plugindir"
NBDKIT="$bin"

# evict: drop the copies' unmapped pages from the page cache.
evict ()
{
  sync
  /usr/bin/python3 -c '
import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$bin" "$plugindir/nbdkit-memory-plugin.so"
}

cat > "$tmpdir/strings.bt" <<EOF
BEGIN { printf("ready\n"); }
interval:s:100 { exit(); }
usdt:$bin:nbdkit:log
{ printf("log|%s|%s|%s\n", str(arg0), str(arg1), str(arg2)); }
usdt:$bin:nbdkit:connection_accept
{ printf("accept|%s|%s\n", str(arg2), str(arg3)); }
usdt:$bin:nbdkit:handshake_option
{ printf("option|%s\n", str(arg2)); }
usdt:$bin:nbdkit:layer_call_start
{ printf("call|%s|%s\n", str(arg2), str(arg3)); }
usdt:$bin:nbdkit:layer_call_done
{ printf("done|%s|%s\n", str(arg3), str(arg4)); }
usdt:$bin:nbdkit:reply_send
{ printf("reply|%s\n", str(arg2)); }
usdt:$bin:nbdkit:connection_close
{ printf("close|%s\n", str(arg1)); }
EOF

# check MODE: trace one client of the running server ($uri).
check ()
{
  local mode="$1" out="$tmpdir/$1.out"
  evict
  start_tool "$out" '^ready$' bpftrace "$tmpdir/strings.bt"
  t nbdsh -u "$uri" -c '
assert h.pread(4096, 0) == bytes(4096)
h.pwrite(b"s" * 4096, 8192)
assert h.pread(4096, 8192) == b"s" * 4096
' || fail "$mode: the client failed"
  # The close probe fires after the client has gone.
  wait_for_output "$out" '^close\|' "$tool" 20 ||
    { cat "$out" "$out.err"; fail "$mode: no connection_close"; }
  interrupt_tracer "$tool"
  echo "--- $mode"
  sort "$out" | uniq -c

  local want
  for want in \
      'log|debug|nbdkit|accepted connection ' \
      'accept|unix|unix' \
      'option|go' 'option|structured_reply' \
      'call|memory|pread' 'done|memory|pread' \
      'call|memory|pwrite' 'done|memory|pwrite' \
      'close|eof'; do
    grep -qF -- "$want" "$out" ||
      fail "$mode: no line starting \"$want\" in the tracer's output"
  done
  grep -Eq '^reply\|(simple|structured|extended)$' "$out" ||
    fail "$mode: reply_send's kind is not one the server sends"
  # No string argument came out empty.
  if grep -E '^[a-z]+\|(.*\|)?$|\|\|' "$out"; then
    fail "$mode: a probe's string argument read as empty"
  fi
}

start_server memory 1M
check foreground
stop_server

pidfile="$tmpdir/daemon.pid"
sock="$tmpdir/daemon.sock"
t "$bin" -U "$sock" -P "$pidfile" memory 1M ||
  fail "the server did not start in the background"
wait_for 20 -s "$pidfile" || fail "the daemon wrote no pid file"
daemon_pid="$(cat "$pidfile")"
cleanup_fn _kill_pid "$daemon_pid"
uri="nbd+unix:///?socket=$sock"
check daemonised
_kill_pid "$daemon_pid"
echo "every string argument reached the tracer"
