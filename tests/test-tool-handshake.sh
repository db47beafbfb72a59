#!/usr/bin/env bash
# tools/nbdkit-handshake.bt (through tools/nbdkit-trace -p PID): three
# good connections (each asks for base:allocation) and one raw client
# that sends a bad option magic.  The trace must show exactly 4 starts,
# 3 dones with export "" and structured replies, 3 accepted
# base:allocation meta contexts, 3 export lines with the 64M size, and
# 1 failure "bad option magic"; each good connection's options include
# go (or opt_go) and set_meta_context; the summary counts match.
# EXPECT_DONE overrides the expected number of good handshakes.
source "$(dirname "$0")/functions.sh"
requires_cmd bpftrace nbdsh python3
requires_root
requires grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"
tracing_lock
expect_done="${EXPECT_DONE:-3}"

start_server memory 64M
out="$tmpdir/out"
timeout -k 5 120 "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" \
  handshake > "$out" 2> "$tmpdir/err" &
tool=$!
cleanup_fn _kill_pid "$tool"
wait_for_output "$out" '^TIME' "$tool" || { cat "$out" "$tmpdir/err"; fail "no start"; }

for i in 1 2 3; do
  t nbdsh -c 'h.add_meta_context("base:allocation")' -u "$uri" \
    -c 'assert h.can_meta_context("base:allocation")' -c 'h.pread(512, 0)'
done
# Fixed newstyle greeting, then client flags, then a bad option magic.
t python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
g = b""
while len(g) < 18:
    g += s.recv(18 - len(g))
s.sendall(struct.pack(">I", 1) + b"NOTMAGIC" + struct.pack(">II", 1, 0))
s.recv(1)
' "$sock"
sleep 0.5
interrupt_tracer "$tool"
cat "$out"

n () { awk "$1" "$out" | wc -l; }
check () { [ "$2" -eq "$3" ] || fail "$1: expected $3, saw $2"; }
check starts "$(n '$3 == "start"')" 4
check dones "$(n '$3 == "done" && $5 == "\"\"" && $7 == 1')" "$expect_done"
check metas "$(n '$3 == "meta" && $4 == "\"base:allocation\"" && $NF == "accepted"')" 3
check exports "$(n '$3 == "export" && $6 == 67108864')" 3
check failures "$(grep -c ' fail  *bad option magic$' "$out")" 1
failed_id="$(awk '$3 == "fail" { print $2 }' "$out")"
for id in $(awk '$3 == "done" { print $2 }' "$out"); do
  [ "$id" != "$failed_id" ] || fail "connection $id both done and failed"
  awk -v id="$id" '$2 == id && $3 == "option"' "$out" |
    grep -Eq ' (opt_)?go ' || fail "connection $id: no go option"
  awk -v id="$id" '$2 == id && $3 == "option"' "$out" |
    grep -Eq ' (opt_)?set_meta_context ' ||
    fail "connection $id: no set_meta_context option"
done
grep -q '^@failures\[bad option magic\]: 1$' "$out" || fail "summary failures"
grep -q '^@done: 3$' "$out" || fail "summary done"
