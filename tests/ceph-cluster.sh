#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
#
# tests/ceph-cluster.sh: a throw-away one-node Ceph cluster for the rbd
# and S3 plugins' tests, and the way to try those plugins by hand.
#
#   tests/ceph-cluster.sh start DIR [--owner PID]
#   tests/ceph-cluster.sh stop DIR
#
# "start" builds a cluster from Debian's ceph 16 packages (ceph-mon,
# ceph-mgr, ceph-osd, radosgw, ceph-common) with its own configuration
# in DIR: one monitor, one manager, one OSD keeping everything in RAM
# (osd objectstore = memstore, so keep images small) and radosgw's beast
# frontend serving S3.  Everything listens on 127.0.0.1 on free ports,
# speaks msgr2 only, and every pool has size 1 and 8 placement groups
# with the autoscaler off.  It waits (bounded) until every placement
# group is active+clean, creates the pool "rbd" (rbd pool init), a
# client "client.nbdkit" allowed to use it, and an S3 user with a fixed
# access key and secret.  Then it writes:
#
#   DIR/env    a shell file to source: CEPH_CONF, CEPH_KEYRING (a keyring
#              holding every key: the ceph tools read $CEPH_KEYRING too),
#              CEPH_ID (the plugin's client, "nbdkit", without "client."),
#              CEPH_ID_KEYRING (that client's key alone), RBD_POOL,
#              S3_ENDPOINT (http://127.0.0.1:PORT), S3_ACCESS_KEY,
#              S3_SECRET_KEY, S3_REGION, and CEPH_CLUSTER_DIR
#   DIR/pids   one line per daemon: its name and process id
#   DIR/owner  the --owner PID, if given
#
# The ceph, rbd, rados and radosgw-admin commands work against it once
# DIR/env is sourced (CEPH_CONF names the cluster's configuration, which
# names the admin keyring).  With --owner PID a watchdog stops the
# cluster when PID exits.  If a daemon does not come up, "start" prints
# one line saying which, the tail of its log, and exits 1.
#
# "stop" kills every daemon (and the watchdog) with SIGKILL: a memstore
# OSD writes all its data out on SIGTERM, which is slow and useless
# here.  Then it removes DIR's contents.
#
# To try the rbd plugin by hand:
#
#   tests/ceph-cluster.sh start /tmp/ceph
#   . /tmp/ceph/env
#   rbd create --size 64M disk
#   ./nbdkit rbd image=disk conf=$CEPH_CONF id=$CEPH_ID keyring=$CEPH_KEYRING
#   ...
#   tests/ceph-cluster.sh stop /tmp/ceph
#
# The tests get it through requires_ceph in tests/functions.sh, which
# starts one cluster per "make check" run and shares it between tests.

set -e
set -u

# Every wait is bounded by this many seconds.
readonly START_TIMEOUT=${CEPH_CLUSTER_TIMEOUT:-60}

# The S3 user's credentials are fixed: tests and users can write them
# down.  They only ever open a bucket on 127.0.0.1.
readonly S3_ACCESS_KEY=NBDKITTESTACCESSKEY0
readonly S3_SECRET_KEY=nbdkitTestSecretKey0000000000000000000000
readonly S3_REGION=default

PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

me=${0##*/}

usage ()
{
  echo "usage: $me start DIR [--owner PID] | $me stop DIR" >&2
  exit 2
}

die ()
{
  echo "$me: $*" >&2
  exit 1
}

free_port ()
{
  /usr/bin/python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Every command that talks to the cluster is bounded in time.
ceph_cmd ()
{
  timeout 30 ceph --connect-timeout 20 -c "$conf" "$@"
}

# started NAME PID: remember a daemon for "stop".
started ()
{
  echo "$1 $2" >> "$dir/pids"
}

# fail_daemon NAME LOG MESSAGE: the one line, the log's tail, exit 1
# (the EXIT trap kills what was started).
fail_daemon ()
{
  echo "$me: $3" >&2
  if [ -s "$2" ]; then
    echo "--- last lines of $2:" >&2
    tail -n 20 "$2" >&2
  fi
  exit 1
}

# spawn NAME LOG CMD...: run a daemon in the foreground of its own
# session, in the background of this script, with no inherited fds
# beyond stdio (the test lock on fd 9 must not outlive the tests).
spawn ()
{
  local name=$1 log=$2
  shift 2
  setsid "$@" </dev/null >>"$log" 2>&1 9>&- &
  started "$name" $!
  # "stop" on failure kills it: no job notice from this shell.
  disown $!
}

# alive NAME: is the daemon recorded as NAME still running?
alive ()
{
  local pid
  pid=$(awk -v n="$1" '$1 == n { print $2 }' "$dir/pids" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# wait_until SECONDS DAEMON LOG WHAT CMD...: retry CMD every 0.2 s until
# it succeeds; fail naming WHAT if it does not within SECONDS or if
# DAEMON dies first.
wait_until ()
{
  local secs=$1 daemon=$2 log=$3 what=$4 end
  shift 4
  end=$(( $(date +%s) + secs ))
  while ! "$@" >/dev/null 2>&1; do
    if ! alive "$daemon"; then
      fail_daemon "$daemon" "$log" "$daemon exited before $what"
    fi
    if [ "$(date +%s)" -ge "$end" ]; then
      fail_daemon "$daemon" "$log" "$what: not within ${secs}s"
    fi
    sleep 0.2
  done
}

# Every placement group of every pool is reported, and active+clean.
all_pgs_clean ()
{
  local pools stat
  pools=$(ceph_cmd osd pool ls detail -f json) || return 1
  stat=$(ceph_cmd pg stat -f json) || return 1
  /usr/bin/python3 - "$pools" "$stat" <<'EOF'
import json, sys
pools = json.loads(sys.argv[1])
stat = json.loads(sys.argv[2])
want = sum(p["pg_num"] for p in pools)
summary = stat.get("pg_summary", stat)
states = summary.get("num_pg_by_state", [])
clean = sum(s["num"] for s in states if s["name"] == "active+clean")
total = summary.get("num_pgs", 0)
sys.exit(0 if want > 0 and total == want and clean == want else 1)
EOF
}

osd_up ()
{
  [ "$(ceph_cmd osd stat -f json |
       /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])')" = 1 ]
}

rgw_answers ()
{
  curl -s -m 2 -o /dev/null "http://127.0.0.1:$rgw_port/"
}

do_stop ()
{
  local name pid
  [ -d "$dir" ] || return 0
  if [ -f "$dir/pids" ]; then
    while read -r name pid; do
      # The watchdog runs "stop" itself: do not kill the caller.
      [ "$pid" = "$$" ] && continue
      kill -9 "$pid" 2>/dev/null || :
    done < "$dir/pids"
    # Wait (bounded) until they are gone, so the data can be removed.
    for _ in $(seq 50); do
      local any=0
      while read -r name pid; do
        [ "$pid" = "$$" ] && continue
        kill -0 "$pid" 2>/dev/null && any=1
      done < "$dir/pids"
      [ $any -eq 0 ] && break
      sleep 0.1
    done
  fi
  rm -rf "${dir:?}"/{env,pids,owner,ceph.conf,keyring,*.keyring,monmap,mon,mgr,osd,rgw,run,log,watchdog.log}
  rmdir "$dir" 2>/dev/null || :
}

do_start ()
{
  local owner=$1 fsid mon_port osd_uuid osd_key c

  for c in ceph-mon ceph-mgr ceph-osd radosgw ceph rbd ceph-authtool \
           monmaptool radosgw-admin; do
    command -v "$c" >/dev/null ||
      die "$c not found: install Debian's ceph-mon ceph-mgr ceph-osd radosgw ceph-common"
  done

  if [ -f "$dir/pids" ]; then
    die "$dir already holds a cluster: run '$me stop $dir' first"
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  conf=$dir/ceph.conf
  mkdir -p "$dir"/{mon/a,mgr/x,osd/0,rgw,run,log}
  : > "$dir/pids"

  # Whatever fails below, leave nothing running.
  # shellcheck disable=SC2154
  trap 'st=$?; if [ $st -ne 0 ]; then do_stop; fi; exit $st' EXIT

  fsid=$(cat /proc/sys/kernel/random/uuid)
  mon_port=$(free_port)
  rgw_port=$(free_port)

  cat > "$conf" <<EOF
# A one-node test cluster made by tests/ceph-cluster.sh.
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
mon initial members = a
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind msgr1 = false
ms bind msgr2 = true
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring
run dir = $dir/run
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.1
mgr stats period = 1
rbd default features = layering,exclusive-lock,object-map,fast-diff,deep-flatten

[mon]
mon data = $dir/mon/\$id

[mgr]
mgr data = $dir/mgr/\$id

[osd]
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = 2147483648

[client.rgw.a]
rgw data = $dir/rgw
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
log file = $dir/log/rgw.a.log
EOF

  # One keyring for every entity, as a developer's cluster does; the
  # plugin's client gets a keyring of its own.
  {
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. \
                  --cap mon 'allow *'
    ceph-authtool "$dir/keyring" --gen-key -n client.admin \
                  --cap mon 'allow *' --cap osd 'allow *' \
                  --cap mgr 'allow *' --cap mds 'allow *'
    ceph-authtool "$dir/keyring" --gen-key -n mgr.x \
                  --cap mon 'allow profile mgr' --cap osd 'allow *' \
                  --cap mds 'allow *'
    ceph-authtool "$dir/keyring" --gen-key -n client.rgw.a \
                  --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw'
    ceph-authtool --create-keyring "$dir/client.nbdkit.keyring" --gen-key \
                  -n client.nbdkit --cap mon 'profile rbd' \
                  --cap osd 'profile rbd' --cap mgr 'profile rbd'
    ceph-authtool "$dir/keyring" --import-keyring "$dir/client.nbdkit.keyring"
  } > "$dir/log/keyring.log" 2>&1 ||
    fail_daemon keyring "$dir/log/keyring.log" "ceph-authtool failed"

  monmaptool --create --fsid "$fsid" \
             --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" \
           --keyring "$dir/keyring" > "$dir/log/mkfs.log" 2>&1 ||
    fail_daemon mon.a "$dir/log/mkfs.log" "ceph-mon --mkfs failed"

  spawn mon.a "$dir/log/mon.a.out" ceph-mon -c "$conf" -f -i a
  wait_until "$START_TIMEOUT" mon.a "$dir/log/mon.a.log" \
             "the monitor answering on 127.0.0.1:$mon_port" ceph_cmd mon stat

  spawn mgr.x "$dir/log/mgr.x.out" ceph-mgr -c "$conf" -f -i x

  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  osd_key=$(ceph-authtool --gen-print-key)
  printf '[osd.0]\n\tkey = %s\n' "$osd_key" > "$dir/osd/0/keyring"
  echo "{\"cephx_secret\": \"$osd_key\"}" |
    ceph_cmd osd new "$osd_uuid" -i - > /dev/null ||
    die "could not register the OSD with the monitor"
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" \
           --keyring "$dir/osd/0/keyring" > "$dir/log/osd-mkfs.log" 2>&1 ||
    fail_daemon osd.0 "$dir/log/osd-mkfs.log" "ceph-osd --mkfs failed"
  spawn osd.0 "$dir/log/osd.0.out" \
        ceph-osd -c "$conf" -f -i 0 --keyring "$dir/osd/0/keyring"
  wait_until "$START_TIMEOUT" osd.0 "$dir/log/osd.0.log" "the OSD up" osd_up

  ceph_cmd osd pool create rbd 8 8 > "$dir/log/pool.log" 2>&1 ||
    fail_daemon mon.a "$dir/log/pool.log" "could not create the pool rbd"
  timeout 30 rbd -c "$conf" pool init rbd >> "$dir/log/pool.log" 2>&1 ||
    fail_daemon osd.0 "$dir/log/pool.log" "rbd pool init rbd failed"

  spawn rgw.a "$dir/log/rgw.a.out" radosgw -c "$conf" -f -n client.rgw.a
  wait_until "$START_TIMEOUT" rgw.a "$dir/log/rgw.a.log" \
             "radosgw answering on 127.0.0.1:$rgw_port" rgw_answers
  timeout 30 radosgw-admin -c "$conf" user create --uid=nbdkit \
          --display-name="nbdkit tests" \
          --access-key="$S3_ACCESS_KEY" --secret-key="$S3_SECRET_KEY" \
          > "$dir/log/rgw-user.log" 2>&1 ||
    fail_daemon rgw.a "$dir/log/rgw-user.log" "radosgw-admin user create failed"

  wait_until "$START_TIMEOUT" mgr.x "$dir/log/mgr.x.log" \
             "every placement group active+clean" all_pgs_clean

  cat > "$dir/env.tmp" <<EOF
# Made by tests/ceph-cluster.sh: source it to use the cluster in $dir.
CEPH_CLUSTER_DIR=$dir
CEPH_CONF=$conf
CEPH_KEYRING=$dir/keyring
CEPH_ID=nbdkit
CEPH_ID_KEYRING=$dir/client.nbdkit.keyring
RBD_POOL=rbd
S3_ENDPOINT=http://127.0.0.1:$rgw_port
S3_ACCESS_KEY=$S3_ACCESS_KEY
S3_SECRET_KEY=$S3_SECRET_KEY
S3_REGION=$S3_REGION
export CEPH_CLUSTER_DIR CEPH_CONF CEPH_KEYRING CEPH_ID CEPH_ID_KEYRING RBD_POOL
export S3_ENDPOINT S3_ACCESS_KEY S3_SECRET_KEY S3_REGION
EOF
  mv "$dir/env.tmp" "$dir/env"

  if [ -n "$owner" ]; then
    # The watchdog: poll the owner, then stop the cluster.  Its own
    # session, no inherited fds, so it outlives this script but not
    # the owner.
    # shellcheck disable=SC2016
    setsid bash -c '
      while kill -0 "$1" 2>/dev/null; do sleep 1; done
      exec "$2" stop "$3"' watchdog "$owner" "$(realpath "$0")" "$dir" \
      </dev/null >>"$dir/log/watchdog.log" 2>&1 9>&- &
    started watchdog $!
    echo "$owner" > "$dir/owner"
  fi
  trap - EXIT
  echo "$me: cluster up in $dir (mon 127.0.0.1:$mon_port, S3 http://127.0.0.1:$rgw_port)"
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
case "$cmd" in
  start)
    owner=
    while [ $# -gt 0 ]; do
      case "$1" in
        --owner) [ $# -ge 2 ] || usage; owner=$2; shift 2 ;;
        *) usage ;;
      esac
    done
    if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
      die "--owner $owner: no such process"
    fi
    do_start "$owner"
    ;;
  stop)
    [ $# -eq 0 ] || usage
    do_stop
    ;;
  *) usage ;;
esac
