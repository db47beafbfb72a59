#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Our torrent plugin and Debian's (nbdkit 1.32) on the same command
# lines against the same swarm (tests/torrent-seed.sh): the same bytes,
# for the default file (the largest) and for file=.  Each server gets
# its own cache directory, so each downloads from the seeder.
source "$(dirname "$0")/torrent-seed.sh"
torrent_netns "$0" "$@"
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy
debian_so=/usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-torrent-plugin.so
requires test -f "$debian_so"
export PATH=/usr/bin:$PATH

mkdir "$tmpdir/data"
head -c $(( 2 * 1024 * 1024 + 777 )) /dev/urandom > "$tmpdir/data/disk.img"
head -c 70000 /dev/urandom > "$tmpdir/data/small.bin"
seed_torrent "$tmpdir/data" 32

# Each client listens on (and sends its uTP packets from) a port of its
# own: one on the address the previous client had just left could find
# the seeder still holding the old uTP connection there, and stall (seen
# under CI's load).  Ours takes listen-interfaces=; Debian's plugin has
# no such parameter and takes libtorrent's 6881, so for its second run
# a placeholder holds 6881 and libtorrent binds the next free port.
hold_port ()
{
  /usr/bin/python3 -c '
import socket, sys, time
t = socket.socket(); t.bind(("0.0.0.0", 6881)); t.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 6881))
print("held", flush=True); time.sleep(120)' > "$tmpdir/hold" &
  holder=$!
  cleanup_fn _kill_pid "$holder"
  wait_for 10 -s "$tmpdir/hold" || fail "could not hold port 6881"
}
n=0
for server in "$NBDKIT" /usr/bin/nbdkit; do
  for file in "" file=data/small.bin; do
    n=$(( n + 1 ))
    mkdir "$tmpdir/cache$n"     # Debian's plugin wants it to exist
    port=()
    [ "$server" = /usr/bin/nbdkit ] ||
      port=(listen-interfaces=127.0.0.1:$(( 6890 + n )))
    [ "$server/$n" != /usr/bin/nbdkit/4 ] || hold_port
    t "$server" -U - torrent "$tmpdir/t.torrent" $file "${port[@]}" \
      cache="$tmpdir/cache$n" --run "nbdcopy \"\$uri\" $tmpdir/out$n" ||
      fail "$server torrent $file failed"
    echo "$server $file: $SECONDS s"
  done
done
cmp "$tmpdir/out1" "$tmpdir/out3" || fail "the default file differs from Debian's"
cmp "$tmpdir/out2" "$tmpdir/out4" || fail "file=data/small.bin differs from Debian's"
cmp "$tmpdir/out1" "$tmpdir/data/disk.img" || fail "not the largest file"
cmp "$tmpdir/out2" "$tmpdir/data/small.bin" || fail "not data/small.bin"
