# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Sourced by the torrent tests (after functions.sh), which run in a
# private network namespace holding only the loopback interface: a
# BitTorrent client reaches for DHT routers, UPnP gateways and local
# discovery multicast, none of which may leave this machine.
#   torrent_netns "$0" "$@"   first line of a test: re-run it in its own
#                             network namespace (skips unless root)
#   seed_torrent DIR PIECE_KIB [UPLIMIT [hold]]
#                             make $tmpdir/t.torrent from DIR (announcing
#                             to 127.0.0.1) with transmission-create,
#                             start opentracker and a seeder
#                             (torrent-seeder.py, python3-libtorrent), and
#                             wait until the tracker lists the seeder;
#                             it uploads at most UPLIMIT bytes a second;
#                             sets $hash, the torrent's info hash (hex),
#                             and $seeder_pid; with hold, it uploads
#                             nothing much until `kill -USR1 $seeder_pid`
#
# torrent_netns runs before functions.sh is sourced (which takes the
# test lock and makes $tmpdir), so it does its own checks.
torrent_netns ()
{
  if [ -z "${NBDKIT_TORRENT_NETNS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "$1: SKIP: needs root for a private network namespace"
      exit 77
    fi
    NBDKIT_TORRENT_NETNS=1 exec unshare --net -- "$@"
  fi
  ip link set lo up
}

seed_torrent ()
{
  local dir="$1" piece="$2" uplimit="${3:-0}" hold="${4:-}" i
  requires_cmd transmission-create transmission-show opentracker curl
  requires python3 -c 'import libtorrent'
  t transmission-create -o "$tmpdir/t.torrent" -s "$piece" \
    -t http://127.0.0.1:6969/announce "$dir" >/dev/null ||
    fail "transmission-create failed"
  hash="$(transmission-show "$tmpdir/t.torrent" |
          awk '$1 == "Hash:" { print $2 }')"
  [ -n "$hash" ] || fail "no info hash in transmission-show's output"

  # Debian's opentracker serves only the torrents it is told of, drops
  # to nobody and chroots into -d, so its list sits in a readable dir.
  mkdir -m 755 "$tmpdir/tracker"
  echo "$hash" > "$tmpdir/tracker/whitelist"
  chmod 644 "$tmpdir/tracker/whitelist"
  timeout -k 5 120 opentracker -i 127.0.0.1 -p 6969 -P 6969 \
    -d "$tmpdir/tracker" -w whitelist > "$tmpdir/tracker.log" 2>&1 &
  cleanup_fn _kill_pid $!

  # The seeder (python3-libtorrent) serves DIR's parent, where the
  # torrent's name points.
  timeout -k 5 120 python3 "$abs_top_srcdir/tests/torrent-seeder.py" \
    "$tmpdir/t.torrent" "$(dirname "$dir")" 51413 115 "$uplimit" \
    "${hold:-nohold}" "$tmpdir/seeder.pid" > "$tmpdir/seeder.log" 2>&1 &
  cleanup_fn _kill_pid $!
  for (( i = 0; i < 150; i++ )); do
    [ -s "$tmpdir/seeder.pid" ] && break
    sleep 0.1
  done
  seeder_pid=$(cat "$tmpdir/seeder.pid" 2>/dev/null) ||
    { tail -5 "$tmpdir/seeder.log"; fail "the seeder did not start"; }

  # The seeder has announced itself: the tracker's scrape counts one
  # complete peer.
  for (( i = 0; i < 150; i++ )); do
    curl -s "http://127.0.0.1:6969/scrape?info_hash=$(
      echo "$hash" | sed 's/../%&/g')" 2>/dev/null |
      grep -aq '8:completei1e' && return 0
    sleep 0.1
  done
  cat "$tmpdir/tracker.log"; tail -5 "$tmpdir/seeder.log"
  fail "the seeder did not register with the tracker within 15 s"
}
