#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The partition filter above the nbd plugin passes requests on
# asynchronously (nbdkit-async(3)/FILTERS), shifted to the partition:
#  - random bytes copied into partition 2 through ours read back the
#    same through ours, ours with -D nbdkit.async=0 and Debian's nbdkit
#    on the same command, and lie in the upstream at the partition's
#    start;
#  - against an upstream taking 100 ms per read, 32 reads sent together
#    through ours with -t 2 overlap (well under the 1.6 s that two
#    threads need one request at a time), and do not on the
#    synchronous path.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdcopy nbdsh sfdisk python3
[ -x /usr/bin/nbdkit ] && [ -e "$debian_plugindir/nbdkit-nbd-plugin.so" ] ||
  { echo "$0: Debian's nbdkit nbd plugin is not installed"; exit 77; }

# A 64 MiB disk with two partitions: 2 starts at sector 40960 (20 MiB).
truncate -s 64M "$tmpdir/disk"
printf 'start=2048, size=38912\nstart=40960, size=65536\n' |
  sfdisk -q "$tmpdir/disk"
start_upstream file "$tmpdir/disk"

proxy ()
{
  local name="$1" server="$2"
  shift 2
  rm -f "$tmpdir/$name.pid"
  "$server" -f -U "$tmpdir/$name.sock" -P "$tmpdir/$name.pid" "$@" \
    --filter=partition nbd socket="$up_sock" partition=2 9>&- &
  cleanup_fn _kill_pid $!
  wait_for 20 -s "$tmpdir/$name.pid" || fail "proxy $name did not start"
  printf -v "uri_$name" 'nbd+unix:///?socket=%s' "$tmpdir/$name.sock"
}
proxy async "$NBDKIT" -t 2
proxy sync "$NBDKIT" -t 2 -D nbdkit.async=0
proxy debian /usr/bin/nbdkit

head -c 32M /dev/urandom > "$tmpdir/img"
t nbdcopy --requests=16 "$tmpdir/img" "$uri_async" ||
  fail "copying into the partition failed"
for reader in async sync debian; do
  r="uri_$reader"
  cmp <(t nbdcopy --requests=16 "${!r}" -) "$tmpdir/img" ||
    fail "read through $reader: not the bytes written"
done
cmp <(tail -c +$((40960 * 512 + 1)) "$tmpdir/disk" | head -c 32M) \
  "$tmpdir/img" || fail "the bytes are not at the partition's start"

cat > "$tmpdir/burst.py" <<'PY'
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
bufs = [nbd.Buffer(4096) for i in range(32)]
t0 = time.monotonic()
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 65536)
while h.aio_in_flight() > 0:
    h.poll(-1)
print("%.3f" % (time.monotonic() - t0))
h.shutdown()
PY
# The same disk, now 100 ms a read, on the same socket (each of the
# proxies' connections opens its own connection upstream).
stop_upstream
start_upstream --filter=delay file "$tmpdir/disk" rdelay=100ms
a=$(t /usr/bin/python3 "$tmpdir/burst.py" "$uri_async") || fail "burst failed"
s=$(t /usr/bin/python3 "$tmpdir/burst.py" "$uri_sync") || fail "burst failed"
echo "32 reads of 100 ms: async $a s, synchronous $s s"
awk -v a="$a" 'BEGIN { exit !(a >= 0.1 && a < 1.0) }' ||
  fail "through the partition filter, the reads did not overlap ($a s)"
awk -v s="$s" 'BEGIN { exit !(s >= 1.5) }' ||
  fail "the synchronous path overlapped more than two threads allow ($s s)"
