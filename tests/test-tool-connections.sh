#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-connections.bt (through tools/nbdkit-trace -p PID): three
# clients, one after another, each send exactly 2 reads of 4096 bytes
# and 1 write of 512 bytes, then disconnect.  The trace must show 3
# accepts on transport unix, 3 closes with "requests 3", reason
# "disconnect", bytes_in >= 512 and lifetime_ms sane, and in the ^C
# summary @reads 2, @read_bytes 8192, @writes 1, @write_bytes 512 for
# each connection and @closed 3.
# EXPECT_REQUESTS overrides the expected per-connection request count.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
expect_requests="${EXPECT_REQUESTS:-3}"

start_server memory 64M
out="$tmpdir/out"
start_tool "$out" '^TIME' \
  "$abs_top_srcdir/tools/nbdkit-trace" -p "$server_pid" connections

for i in 1 2 3; do
  t nbdsh -u "$uri" -c 'h.pread(4096, 0)' -c 'h.pread(4096, 8192)' \
    -c 'h.pwrite(b"x" * 512, 512)' -c 'h.shutdown()'
done
for (( i = 0; i < 100; i++ )); do
  [ "$(grep -c ' close ' "$out")" -ge 3 ] && break
  sleep 0.1
done
interrupt_tracer "$tool"
cat "$out"

check () { [ "$2" -eq "$3" ] || fail "$1: expected $3, saw $2"; }
check accepts "$(grep -c ' accept .* transport unix ' "$out")" 3
check closes "$(awk '$3 == "close" && $11 == '"$expect_requests"' &&
                     $13 >= 512 && $9 < 60000 && $NF == "disconnect"' \
                     "$out" | wc -l)" 3
grep -q '^@closed: 3$' "$out" || fail "summary: @closed is not 3"
for id in $(awk '$3 == "close" { print $2 }' "$out"); do
  grep -q "^@reads\[$id\]: 2\$" "$out" || fail "connection $id: reads"
  grep -q "^@read_bytes\[$id\]: 8192\$" "$out" || fail "connection $id: read bytes"
  grep -q "^@writes\[$id\]: 1\$" "$out" || fail "connection $id: writes"
  grep -q "^@write_bytes\[$id\]: 512\$" "$out" || fail "connection $id: write bytes"
done
