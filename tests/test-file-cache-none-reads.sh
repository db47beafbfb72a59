#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# file cache=none, reads of a file on a disk (not tmpfs): the promise of
# nbdkit-file-plugin(1), that pages read do not stay in the page cache
# (fincore once the client is gone), kept without reading the file
# twice: a copy out, with nbdcopy's four connections and with one,
# fetches each byte from the disk about once (the server's read_bytes
# in /proc/PID/io), and gives the right bytes.  Dropping whole 2 MiB
# blocks around each request, as ours once did, threw away the pages of
# the requests beside it and the read-ahead of the next, and read the
# file nearly three times.  Random 4 KiB reads leave nothing cached.
# Debian's nbdkit drops only each request's exact range, which on a
# kernel with large page cache folios leaves most of the file cached:
# its figures are printed for comparison, not checked.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy nbdsh fincore sha256sum
requires test -r /proc/self/io

# tmpfs reads nothing from a disk: put the file on one.
dir="$tmpdir"
if [ "$(stat -f -c %T "$dir")" = tmpfs ]; then
  dir="$(mktemp -d /var/tmp/nbdkit-test.XXXXXX)"
  cleanup_fn rm -rf "$dir"
  [ "$(stat -f -c %T "$dir")" != tmpfs ] || {
    echo "$0: SKIP: no disk-backed directory (TMPDIR and /var/tmp are tmpfs)"
    exit 77
  }
fi
disk="$dir/disk.img"
size=$(( 64 * 1048576 ))
head -c "$size" /dev/urandom > "$disk"
want="$(sha256sum < "$disk")"

# Out of the page cache (written back first: dirty pages stay).
uncache ()
{
  /usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$disk"
}
resident () { fincore -b -n -o RES "$disk" | tr -d ' '; }
# The server drops what is left when it sees the client go, which may
# be just after the client has exited: wait (bounded) for that.
resident_settled ()
{
  local i r
  for (( i = 0; i < 50; i++ )); do
    r="$(resident)"
    [ "$r" -le 1048576 ] && break
    sleep 0.2
  done
  echo "$r"
}
read_bytes () { awk '$1 == "read_bytes:" { print $2 }' "/proc/$1/io"; }

# copy_out SERVER NBDCOPY-ARGS...: the file copied out through SERVER
# with cache=none; sets $fetched (bytes the server read from the disk)
# and $left (bytes of the file still cached after the client left).
copy_out ()
{
  local server="$1" pid
  shift
  uncache
  [ "$(resident)" -eq 0 ] || fail "the file is still cached before the copy"
  NBDKIT="$server" start_server file "$disk" cache=none
  pid="$(cat "$pidfile")"
  t nbdcopy "$@" "$uri" "$dir/out.img" || fail "$server: nbdcopy $* failed"
  [ "$(sha256sum < "$dir/out.img")" = "$want" ] ||
    fail "$server: nbdcopy $*: bytes differ"
  rm -f "$dir/out.img"
  fetched="$(read_bytes "$pid")"
  if [ "$server" = "$NBDKIT" ]; then
    left="$(resident_settled)"
    stop_server
  else
    stop_server
    left="$(resident)"
  fi
  echo "$server, nbdcopy $*: read $fetched bytes from the disk for" \
    "$size, $left bytes left cached"
}

for conns in 4 1; do
  copy_out "$NBDKIT" --connections=$conns
  [ "$fetched" -ge "$size" ] ||
    fail "read_bytes says $fetched: this test cannot see the disk reads"
  [ "$fetched" -le $(( size * 5 / 4 )) ] ||
    fail "cache=none, $conns connection(s): the file was read" \
      "$fetched bytes from the disk, not about once ($size)"
  [ "$left" -le 1048576 ] ||
    fail "cache=none, $conns connection(s): $left bytes left cached"
  if [ -x /usr/bin/nbdkit ]; then
    copy_out /usr/bin/nbdkit --connections=$conns
  fi
done

# Random 4 KiB reads, then nothing cached.
uncache
start_server file "$disk" cache=none
t nbdsh -u "$uri" -c '
import random
r = random.Random(1)
for i in range(2000):
    h.pread(4096, r.randrange(h.get_size() // 4096) * 4096)
'
left="$(resident_settled)"
stop_server
echo "random 4 KiB reads: $left bytes left cached"
[ "$left" -le 1048576 ] || fail "random reads: $left bytes left cached"
