# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/nfs-ganesha.sh: a private NFS server (nfs-ganesha with its VFS
# backend, and rpcbind) for the nfs plugin's tests.
#
# Source it FIRST, before functions.sh: ganesha cannot start without
# rpcbind, and rpcbind wants port 111 and /run/rpcbind.sock, which
# belong to the machine.  So the test re-runs itself in network and
# mount namespaces of its own (unshare, as root): there 127.0.0.1 is a
# loopback nobody else sees, /run is a private tmpfs, and everything
# started there goes away with the test.  Nothing outside is touched.
# It skips (77) when not root or when a tool is missing.
#
# Then, after functions.sh:
#   start_ganesha        rpcbind, then ganesha on ports 20490 (NFS)
#                        and 20491 (MOUNT), NFSv3 and NFSv4, waiting at
#                        most 20 s until both are registered; both are
#                        killed by pid at exit
#   kill_ganesha         kill -9 ganesha (and wait for it)
#   launch_ganesha       start ganesha again (same ports and exports)
# Exports (in $tmpdir/ganesha):
#   $nfs_rw   directory exported read-write as /export (no root squash)
#   $nfs_ro   directory exported read-only as /ro
#   $nfs_url  nfs://127.0.0.1  (append /export/FILE?version=... )
#   $ganesha_log  ganesha's log

if [ -z "${NBDKIT_NFS_NAMESPACE:-}" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "$0: SKIP: needs root (network and mount namespaces)"
    exit 77
  fi
  for _cmd in unshare ip ganesha.nfsd rpcbind; do
    if ! command -v "$_cmd" > /dev/null &&
       ! [ -x "/usr/sbin/$_cmd" ] && ! [ -x "/usr/bin/$_cmd" ]; then
      echo "$0: SKIP: $_cmd not found (nfs-ganesha, nfs-ganesha-vfs," \
        "rpcbind, iproute2)"
      exit 77
    fi
  done
  NBDKIT_NFS_NAMESPACE=1 exec unshare --net --mount --propagation private \
    -- bash "$0" "$@"
fi

start_ganesha ()
{
  local dir="$tmpdir/ganesha" i
  PATH="$PATH:/usr/sbin"
  mkdir -p "$dir/export" "$dir/ro" "$dir/recovery"
  nfs_rw="$dir/export"
  nfs_ro="$dir/ro"
  nfs_url="nfs://127.0.0.1"
  ganesha_log="$dir/ganesha.log"
  ip link set lo up || fail "cannot bring up lo in the test's namespace"
  mount -t tmpfs -o mode=755 nbdkit-nfs-run /run ||
    fail "cannot mount a private /run"
  mkdir -p /run/rpcbind /run/ganesha

  rpcbind -f &
  rpcbind_pid=$!
  cleanup_fn _nfs_stop "$rpcbind_pid"
  for (( i = 0; i < 50; i++ )); do
    [ -S /run/rpcbind.sock ] && break
    sleep 0.1
  done
  [ -S /run/rpcbind.sock ] || fail "rpcbind did not start within 5 s"

  cat > "$dir/ganesha.conf" <<EOF
NFS_CORE_PARAM {
  NFS_Port = 20490;
  MNT_Port = 20491;
  Protocols = 3, 4;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  # NFSv3 mounts name the export as NFSv4 does (/export), not by its
  # directory here.
  Mount_Path_Pseudo = true;
}
NFSV4 {
  Graceless = true;
  RecoveryBackend = fs;
  RecoveryRoot = "$dir/recovery";
}
EXPORT {
  Export_Id = 1;
  Path = "$nfs_rw";
  Pseudo = /export;
  Access_Type = RW;
  Squash = No_Root_Squash;
  SecType = sys;
  FSAL { Name = VFS; }
}
EXPORT {
  Export_Id = 2;
  Path = "$nfs_ro";
  Pseudo = /ro;
  Access_Type = RO;
  Squash = No_Root_Squash;
  SecType = sys;
  FSAL { Name = VFS; }
}
EOF
  launch_ganesha
}

# Ganesha says it is ready in its log once it has registered with
# rpcbind and serves; the log is emptied first, so a restart waits for
# its own line.
launch_ganesha ()
{
  local dir="$tmpdir/ganesha" i
  : > "$ganesha_log"
  ganesha.nfsd -F -f "$dir/ganesha.conf" -L "$ganesha_log" \
    -p "$dir/ganesha.pid" -N NIV_EVENT &
  ganesha_pid=$!
  cleanup_fn _nfs_stop "$ganesha_pid"
  for (( i = 0; i < 100; i++ )); do
    grep -q "NFS SERVER INITIALIZED" "$ganesha_log" && return 0
    kill -0 "$ganesha_pid" 2>/dev/null || break
    sleep 0.2
  done
  tail -20 "$ganesha_log" >&2
  fail "ganesha did not start within 20 s (log above)"
}

# Kill PID, a child of this shell, and reap it quietly.
_nfs_stop ()
{
  kill -9 "$1" 2>/dev/null || :
  wait "$1" 2>/dev/null || :
}

kill_ganesha ()
{
  _nfs_stop "$ganesha_pid"
}
