#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-handshake.bt (through tools/nbdkit-trace -p PID): three
# good connections (each asks for base:allocation), one raw client that
# sends a bad option magic and one that sends NBD_OPT_EXPORT_NAME with a
# 5000-byte name.  The trace must show exactly 5 starts, 3 dones with
# export "" and structured replies, 3 accepted base:allocation meta
# contexts, 3 export lines with the 64M size, and 2 failures, one
# each: "bad option magic", "export name too long" (handshake_fail
# fires once per connection); each good connection's options include
# go (or opt_go) and set_meta_context; option replies and transmission
# flags are named (each GO answered "ack", each export line naming
# has_flags); the summary counts match.
# EXPECT_DONE overrides the expected number of good handshakes.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh python3
expect_done="${EXPECT_DONE:-3}"

start_server memory 64M
out="$tmpdir/out"
start_tool "$out" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" handshake

for i in 1 2 3; do
  t nbdsh -c 'h.add_meta_context("base:allocation")' -u "$uri" \
    -c 'assert h.can_meta_context("base:allocation")' -c 'h.pread(512, 0)'
done
# Fixed newstyle greeting, client flags, then a bad option magic or an
# EXPORT_NAME whose name is longer than the protocol allows.
raw_client='
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
g = b""
while len(g) < 18:
    g += s.recv(18 - len(g))
if sys.argv[2] == "magic":
    s.sendall(struct.pack(">I", 1) + b"NOTMAGIC" + struct.pack(">II", 1, 0))
else:
    s.sendall(struct.pack(">IQII", 1, 0x49484156454F5054, 1, 5000) +
              b"n" * 5000)
s.recv(1)
'
t python3 -c "$raw_client" "$sock" magic
t python3 -c "$raw_client" "$sock" name
sleep 0.5
interrupt_tracer "$tool"
cat "$out"

n () { awk "$1" "$out" | wc -l; }
check () { [ "$2" -eq "$3" ] || fail "$1: expected $3, saw $2"; }
check starts "$(n '$3 == "start"')" 5
check dones "$(n '$3 == "done" && $5 == "\"\"" && $7 == 1')" "$expect_done"
check metas "$(n '$3 == "meta" && $4 == "\"base:allocation\"" && $NF == "accepted"')" 3
check exports "$(n '$3 == "export" && $6 == 67108864')" 3
check failures "$(n '$3 == "fail"')" 2
check "go acked by name" \
  "$(grep -c ' reply  *option go (7) reply ack (0x1)$' "$out")" "$expect_done"
check "eflags by name" "$(n '$3 == "export" && / has_flags/')" 3
check "bad magic" "$(grep -c ' fail  *bad option magic$' "$out")" 1
check "long name" "$(grep -c ' fail  *export name too long$' "$out")" 1
failed_ids="$(awk '$3 == "fail" { print $2 }' "$out")"
for id in $(awk '$3 == "done" { print $2 }' "$out"); do
  ! grep -qx "$id" <<<"$failed_ids" ||
    fail "connection $id both done and failed"
  awk -v id="$id" '$2 == id && $3 == "option"' "$out" |
    grep -Eq ' (opt_)?go ' || fail "connection $id: no go option"
  awk -v id="$id" '$2 == id && $3 == "option"' "$out" |
    grep -Eq ' (opt_)?set_meta_context ' ||
    fail "connection $id: no set_meta_context option"
done
grep -q '^@failures\[bad option magic\]: 1$' "$out" || fail "summary failures"
grep -q '^@done: 3$' "$out" || fail "summary done"
