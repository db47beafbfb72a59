#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# memory allocator=malloc,mlock=true locks the whole disk into RAM: the
# server's VmLck covers the size.  Without the right to lock that much
# (CAP_IPC_LOCK dropped, RLIMIT_MEMLOCK of 1 MiB) the server refuses to
# start, saying why, rather than serve an unlocked disk.
source "$(dirname "$0")/functions.sh"
requires_root
skip_under_sanitizers "AddressSanitizer turns mlock and mlockall into no-ops"
requires_cmd nbdsh setpriv prlimit
requires "$NBDKIT" memory --dump-plugin
"$NBDKIT" memory --dump-plugin | grep -qx 'mlock=yes' ||
  fail "--dump-plugin does not say mlock=yes"

start_server memory 32M allocator=malloc,mlock=true
locked=$(awk '/^VmLck:/ { print $2 * 1024 }' "/proc/$server_pid/status")
echo "VmLck: $locked bytes"
[ "$locked" -ge $(( 32 * 1048576 )) ] ||
  fail "mlock=true: only $locked bytes locked for a 32 MiB disk"
t nbdsh -u "$uri" -c '
h.pwrite(b"\x5a" * 65536, 1 << 20)
assert h.pread(65536, 1 << 20) == b"\x5a" * 65536
'
stop_server

# Without mlock=true nothing is locked.
start_server memory 32M allocator=malloc
locked=$(awk '/^VmLck:/ { print $2 * 1024 }' "/proc/$server_pid/status")
[ "$locked" -lt 1048576 ] || fail "allocator=malloc locked $locked bytes"
stop_server

status=0
setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
  prlimit --memlock=1048576 \
  "$NBDKIT" -U - memory 32M allocator=malloc,mlock=true --run true \
  2> "$tmpdir/err" || status=$?
cat "$tmpdir/err"
[ "$status" -eq 1 ] || fail "mlock over the limit: exit status $status, not 1"
grep -q 'allocator=malloc,mlock=true: mlock failed' "$tmpdir/err" ||
  fail "mlock over the limit: no clear error"
