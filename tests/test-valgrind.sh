#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server under valgrind memcheck (./nbdkit with NBDKIT_VALGRIND=1:
# --error-exitcode=119 --leak-check=full --errors-for-leak-kinds=definite)
# over a small tour: handshake, reads, writes, zero, trim, flush, block
# status and the export list with the memory and file plugins; read
# past the end, writes to a read-only export, plugin errors, a refused
# open, a write cut short, a bad parameter.  Every server must exit with
# its own status (119 means valgrind found an error or a definite leak;
# the reports are printed).
source "$(dirname "$0")/functions.sh"
requires_cmd valgrind nbdsh nbdinfo python3
skip_under_sanitizers "valgrind cannot run a sanitizer-instrumented binary"

plugin="$abs_builddir/.libs/fault-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"
export NBDKIT_VALGRIND=1 NBDKIT_VALGRIND_LOG="$tmpdir/vg.%p"
# Valgrind makes everything 20-50 times slower.
TEST_CMD_TIMEOUT=240

reports ()
{
  local f
  for f in "$tmpdir"/vg.*; do
    [ -f "$f" ] || continue
    if grep -Eq 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$f"; then
      echo "--- $f" >&2
      cat "$f" >&2
    fi
  done
}

# vg_run WHAT EXPECTED-STATUS NBDKIT-ARGS...
vg_run ()
{
  local what=$1 want=$2 status=0
  shift 2
  t "$NBDKIT" "$@" || status=$?
  if [ "$status" -ne "$want" ]; then
    reports
    fail "$what: status $status, expected $want (119: valgrind errors)"
  fi
  echo "$what: ok"
}

# Memory plugin: the data path and block status.
vg_run "memory plugin" 0 -U - memory 64M --run 'nbdsh --base-allocation -u "$uri" -c "
import nbd
h.pwrite(b\"valgrind\" * 8192, 1 << 20)
assert h.pread(65536, 1 << 20) == b\"valgrind\" * 8192
h.zero(4096, 1 << 20)
h.trim(4096, 2 << 20)
h.flush()
h.block_status(64 << 20, 0, lambda *a: 0)
try:
    h.pread(4096, (64 << 20) - 1024)
    raise AssertionError(\"read past the end succeeded\")
except nbd.Error as e:
    pass
h.shutdown()
"'

# Export list, info and the map over one connection each.
vg_run "export list" 0 -U - memory 1M \
  --run 'nbdinfo --list "$uri" >/dev/null && nbdinfo --map "$uri" >/dev/null'

# File plugin, then the same file read-only.
truncate -s 4M "$tmpdir/disk"
vg_run "file plugin" 0 -U - file "$tmpdir/disk" --run 'nbdsh --base-allocation -u "$uri" -c "
h.pwrite(b\"f\" * 65536, 4096)
assert h.pread(65536, 4096) == b\"f\" * 65536
h.trim(65536, 1 << 20)
h.zero(4096, 2 << 20)
h.flush()
h.block_status(4 << 20, 0, lambda *a: 0)
"'
vg_run "read-only" 0 -r -U - file "$tmpdir/disk" --run 'nbdsh --base-allocation -u "$uri" -c "
import nbd, errno
try:
    h.pwrite(b\"x\", 0)
    raise AssertionError(\"write to a read-only export succeeded\")
except nbd.Error as e:
    assert e.errnum == errno.EPERM, e
"'

# Plugin errors, a refused open and a write cut short, on one server
# stopped with SIGTERM.
start_server "$plugin" fail=pread error=ENOSPC 2> "$tmpdir/server.err"
t nbdsh -u "$uri" -c '
import nbd
try:
    h.pread(512, 0)
    raise AssertionError("failing pread succeeded")
except nbd.Error:
    pass
h.pwrite(b"ok", 0)
'
if t nbdsh -u "nbd+unix:///fail-open?socket=$sock" -c 'pass' 2>/dev/null; then
  fail "fail-open was served"
fi
t python3 "$srcdir/fault-client.py" partial-write "$sock" 0 65536 1000 >/dev/null
kill "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
if [ "$status" -ne 0 ]; then
  cat "$tmpdir/server.err" >&2
  reports
  fail "fault plugin server: status $status after SIGTERM (119: valgrind errors)"
fi
echo "errors and SIGTERM: ok"

# A bad parameter: the error exit path.
vg_run "bad parameter" 1 -U - memory size=bogus --run true 2>/dev/null
