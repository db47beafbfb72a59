# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/nbd-plugin-functions.sh: upstream servers for the nbd plugin's
# tests (sourced after functions.sh).  Each listens on a Unix socket in
# $tmpdir and is stopped by PID at exit.
#
#   make_sparse_disk FILE     16 MiB raw file: random data at 1 MiB
#                             (64 KiB) and 9 MiB (4 KiB), holes elsewhere
#   start_qemu_nbd FILE [ARGS...]   qemu-nbd on $qemu_sock ($qemu_pid)
#   start_nbd_server FILE     nbd-server exporting FILE as "disk" on
#                             $nbds_sock ($nbds_pid)
#   export_flags URI          the export's size, flags and block sizes
#                             from nbdinfo, one "key value" a line (not
#                             can_df, which is the connection's)

make_sparse_disk ()
{
  rm -f "$1"
  truncate -s 16M "$1"
  head -c 65536 /dev/urandom | dd of="$1" bs=64K seek=16 conv=notrunc \
    status=none
  head -c 4096 /dev/urandom | dd of="$1" bs=4K seek=2304 conv=notrunc \
    status=none
}

start_qemu_nbd ()
{
  local file="$1"
  shift
  qemu_sock="$tmpdir/qemu.sock"
  rm -f "$qemu_sock"
  qemu-nbd -f raw -t -k "$qemu_sock" "$@" "$file" 9>&- &
  qemu_pid=$!
  cleanup_fn _kill_pid "$qemu_pid"
  wait_for 20 -S "$qemu_sock" || fail "qemu-nbd did not start"
}

start_nbd_server ()
{
  nbds_sock="$tmpdir/nbds.sock"
  rm -f "$nbds_sock" "$tmpdir/nbds.pid"
  cat > "$tmpdir/nbds.conf" <<CONF
[generic]
    unixsock = $nbds_sock
    allowlist = true
[disk]
    exportname = $1
    trim = true
    flush = true
    fua = true
CONF
  # nbd-server forks into the background and writes its pid file.
  t nbd-server -C "$tmpdir/nbds.conf" -p "$tmpdir/nbds.pid" ||
    fail "nbd-server did not start"
  wait_for 20 -s "$tmpdir/nbds.pid" || fail "nbd-server wrote no pid file"
  nbds_pid="$(cat "$tmpdir/nbds.pid")"
  cleanup_fn _kill_pid "$nbds_pid"
  wait_for 20 -S "$nbds_sock" || fail "nbd-server did not listen"
}

export_flags ()
{
  t nbdinfo --json "$1" | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
for k in sorted(e):
    if k.startswith(("is_", "can_", "block_size_")) and k != "can_df":
        print(k, e[k])'
  # (nbdinfo --json says 0 for nbd-server's size: --size asks plainly.)
  echo "size $(t nbdinfo --size "$1")"
}

# start_upstream ARGS...: our own server ($NBDKIT ARGS) on $up_sock,
# pid $up_pid, stopped at exit.  stop_upstream stops it now.
start_upstream ()
{
  up_sock="$tmpdir/up.sock"
  rm -f "$up_sock" "$tmpdir/up.pid"
  "$NBDKIT" -f -U "$up_sock" -P "$tmpdir/up.pid" "$@" 9>&- &
  up_pid=$!
  cleanup_fn _kill_pid "$up_pid"
  wait_for 20 -s "$tmpdir/up.pid" || fail "upstream did not start: $*"
  up_uri="nbd+unix:///?socket=$up_sock"
}

stop_upstream ()
{
  _kill_pid "$up_pid"
  wait "$up_pid" 2>/dev/null || :
}
