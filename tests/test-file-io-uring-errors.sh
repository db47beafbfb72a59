#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Errors through the file plugin's io_uring path reach the client as
# the same NBD errors as through the synchronous path (-D
# nbdkit.async=0) and Debian's nbdkit:
#
#   a read past the end of the export: EINVAL;
#   a write to a read-only export (-r): EPERM;
#   a file that shrank under the server: the read of what is gone gets
#     EIO (io_uring returns a short read, finished as pread does);
#   a full file system (a 1 MiB tmpfs, in a mount namespace of the
#     test's own): writes get ENOSPC, and the server goes on serving.
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/nbdkit
source "$(dirname "$0")/file-io-uring-setup.sh"

# Print the errno name each request gets: "ok" for success.
cat > "$tmpdir/client.py" <<'PY'
import errno, nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
what = sys.argv[2]

def show(f):
    try:
        f()
        print("ok")
    except nbd.Error as e:
        print(errno.errorcode.get(e.errno, e.errno))

size = h.get_size()
if what == "past-end":
    show(lambda: h.pread(4096, size - 512))
    show(lambda: h.pread(512, size))
elif what == "readonly":
    show(lambda: h.pwrite(b"x" * 4096, 0))
    show(lambda: h.pread(4096, 0))
elif what == "shrink":
    show(lambda: h.pread(4096, 0))
    os.truncate(sys.argv[3], 512 * 1024 + 100)
    show(lambda: h.pread(8192, 512 * 1024))      # 100 bytes left of it
    show(lambda: h.pread(4096, 768 * 1024))      # nothing left
    show(lambda: h.pread(100, 512 * 1024))       # all there
elif what == "full":
    # 4 MiB of writes into a 1 MiB file system.
    results = set()
    for off in range(0, 4 << 20, 1 << 16):
        try:
            h.pwrite(os.urandom(1 << 16), off)
        except nbd.Error as e:
            results.add(errno.errorcode.get(e.errno, e.errno))
    print(" ".join(sorted(results)) or "ok")
    show(lambda: h.pread(4096, 0))
h.shutdown()
PY

# The servers compared: NAME, the server with its options (+ for a
# space), the plugin's arguments.
servers="\
direct-io_uring $NBDKIT direct=true aio=io_uring
io_uring $NBDKIT aio=io_uring
direct-sync $NBDKIT+-D+nbdkit.async=0 direct=true aio=io_uring
debian /usr/bin/nbdkit"

# each CASE EXPECTED [SERVER-OPTION]: CASE against each server, on a
# fresh file of 1 MiB, must print EXPECTED (one line).
each ()
{
  local case="$1" want="$2" opt="${3:-}" name server args got
  while read -r name server args; do
    head -c 1048576 /dev/urandom > "$file"
    got="$(t ${server//+/ } $opt -U - file "$file" $args \
             --run '/usr/bin/python3 "'"$tmpdir"'/client.py" "$uri" '"$case $file" |
           tr '\n' ' ')"
    echo "$case $name: $got"
    [ "$got" = "$want" ] ||
      fail "$case on $name: got \"$got\", want \"$want\""
  done <<< "$servers"
}

file="$dir/disk"
each past-end "EINVAL EINVAL "
each readonly "EPERM ok " -r
each shrink "ok EIO EIO ok "

# A full file system: only where this test may mount a tmpfs in a mount
# namespace of its own.
if ! command -v unshare >/dev/null ||
   ! unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs "$1"' sh "$tmpdir" \
     2>/dev/null; then
  echo "$0: no tmpfs of our own here: ENOSPC not tested"
  exit 0
fi
mkdir "$tmpdir/mnt"
while read -r name server args; do
  got="$(t unshare -m sh -c '
    mnt="$1" server="$2" script="$3"
    shift 3
    mount -t tmpfs -o size=1M tmpfs "$mnt" && truncate -s 4M "$mnt/disk" &&
    $server -U - file "$mnt/disk" "$@" \
      --run "/usr/bin/python3 \"$script\" \"\$uri\" full"
  ' sh "$tmpdir/mnt" "${server//+/ }" "$tmpdir/client.py" $args |
    tr '\n' ' ')"
  echo "full $name: $got"
  [ "$got" = "ENOSPC ok " ] || fail "full on $name: got \"$got\""
done <<< "$servers"
