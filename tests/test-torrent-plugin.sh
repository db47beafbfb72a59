#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The torrent plugin against a real swarm on 127.0.0.1: opentracker and
# a python3-libtorrent seeder (tests/torrent-seed.sh), in a private
# network namespace.  Checked: nbdcopy reads back the seeded file byte
# for byte (the largest file, chosen by default), file= picks another
# file, a magnet link gets the list of files from the seeder, a read
# that cannot get its pieces fails with EIO after timeout=, bad
# parameters are refused, and a cache directory the plugin made itself
# is gone after exit.
source "$(dirname "$0")/torrent-seed.sh"
torrent_netns "$0" "$@"
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh nbdinfo
export PATH=/usr/bin:$PATH

mkdir "$tmpdir/data"
head -c $(( 6 * 1024 * 1024 + 12345 )) /dev/urandom > "$tmpdir/data/disk.img"
printf 'not the largest file\n' > "$tmpdir/data/README"
seed_torrent "$tmpdir/data" 16

# The whole file, through the swarm.
# Each client of the seeder listens on (and sends its uTP packets from)
# a port of its own: a client on the address the previous one had just
# left could find the seeder still holding the old uTP connection there,
# and stall (seen under CI's load).
t "$NBDKIT" -U - torrent "$tmpdir/t.torrent" cache="$tmpdir/cache" \
  listen-interfaces=127.0.0.1:6891 \
  --run "nbdinfo --size \"\$uri\" > $tmpdir/size &&
         nbdcopy \"\$uri\" $tmpdir/out.img" ||
  fail "reading the torrent failed"
[ "$(cat "$tmpdir/size")" = $(( 6 * 1024 * 1024 + 12345 )) ] ||
  fail "size $(cat "$tmpdir/size"), not the file's"
cmp "$tmpdir/data/disk.img" "$tmpdir/out.img" ||
  fail "the bytes read differ from the seeded file"

# Another file, by its path in the torrent; no cache= this time, and
# the directory the plugin makes under TMPDIR is removed at exit.
mkdir "$tmpdir/tmp"
TMPDIR="$tmpdir/tmp" t "$NBDKIT" -U - torrent "$tmpdir/t.torrent" \
  file=data/README listen-interfaces=127.0.0.1:6892 \
  --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 21, h.get_size()
assert h.pread(21, 0) == b\"not the largest file\\n\"
assert h.is_read_only()
"' || fail "file=data/README failed"
[ -z "$(ls -A "$tmpdir/tmp")" ] ||
  fail "the temporary cache was left behind: $(ls "$tmpdir/tmp")"

# A magnet link: the metadata comes from the seeder, found through
# the tracker named in the link.
t "$NBDKIT" -U - torrent \
  "magnet:?xt=urn:btih:$hash&tr=http%3A%2F%2F127.0.0.1%3A6969%2Fannounce" \
  cache="$tmpdir/cache3" listen-interfaces=127.0.0.1:6893 --run "nbdcopy \"\$uri\" $tmpdir/magnet.img" ||
  fail "reading through a magnet link failed"
cmp "$tmpdir/data/disk.img" "$tmpdir/magnet.img" ||
  fail "the bytes read through the magnet link differ"

# A torrent that nobody seeds (the tracker refuses it): a read waits
# timeout= seconds, then fails with EIO and says why.
mkdir "$tmpdir/lonely"
head -c 100000 /dev/urandom > "$tmpdir/lonely/x.img"
t transmission-create -o "$tmpdir/lonely.torrent" \
  -t http://127.0.0.1:6969/announce "$tmpdir/lonely" >/dev/null
t "$NBDKIT" -U - torrent "$tmpdir/lonely.torrent" timeout=1 \
  listen-interfaces=127.0.0.1:6894 \
  cache="$tmpdir/cache2" --run 'nbdsh -u "$uri" -c "
try:
    h.pread(512, 0)
    raise Exception(\"read of an unseeded torrent succeeded\")
except nbd.Error as e:
    assert e.errno == \"EIO\", e.errno
"' 2> "$tmpdir/lonely.err" || { cat "$tmpdir/lonely.err"; fail "timeout="; }
grep -q "still missing after 1 seconds" "$tmpdir/lonely.err" ||
  { cat "$tmpdir/lonely.err"; fail "no message for the timed-out read"; }

# Refused at start-up, with one line that says why.
refuses 'no such file in the torrent' torrent "$tmpdir/t.torrent" \
  file=nope cache="$tmpdir/cache" || fail "file=nope was not refused"
refuses 'torrent=' torrent file=x || fail "a missing torrent= was not refused"
refuses 'too large' torrent "$tmpdir/t.torrent" \
  download-rate-limit=1E || fail "a huge rate limit was not refused"
refuses 'at least 2' torrent "$tmpdir/t.torrent" connections-limit=1 ||
  fail "connections-limit=1 was not refused"
