#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The guestfs plugin serving /dev/sda1 of a partitioned raw image
# (guestfs-image.sh), one appliance per connection, so everything that
# needs a running appliance is done on one nbdsh connection: the size;
# the whole partition read in 2 MiB requests, equal to the partition's
# bytes cut out of the image with dd; a 1.5 MiB write across the 1 MiB
# piece boundary, read back, flushed, and found in the image after the
# server exits (the rest of the partition unchanged).  Beside it, with
# -r, a second server that mounts the partition (mount=DEV:MOUNTPOINT)
# and exports a file that does not exist: the client's connection fails
# and the log says why.  The probes show both
# launches, the export found, reads and writes cut in 1 MiB pieces.
# Errors caught before any launch are checked last.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
source "$srcdir/guestfs-image.sh"
export tmpdir

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:guestfs_launch {
  printf("launch ro=%d result=%d timed=%d\n", arg1, arg3, arg2 > 0); }
usdt:$so:nbdkit:guestfs_export {
  printf("export %s %d\n", str(arg1), arg2); }
usdt:$so:nbdkit:guestfs_read {
  @pieces[0] = count(); @max[0] = max(arg3);
  if (arg5 != arg3 || arg4 == 0 || arg0 < 1 || arg1 < 1) {
    printf("bad read %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5); }
}
usdt:$so:nbdkit:guestfs_write {
  @pieces[1] = count(); @max[1] = max(arg3);
  if (arg5 != arg3 || arg4 == 0 || arg0 < 1 || arg1 < 1) {
    printf("bad write %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5); }
}
BT
start_bpftrace 120 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

# What the write puts where: 1.5 MiB at 1 MiB + 512.
woff=$(( 1024 * 1024 + 512 )) wlen=$(( 1536 * 1024 ))
head -c $wlen /dev/urandom > "$tmpdir/new.bin"
cp "$tmpdir/part.img" "$tmpdir/expected.img"
dd if="$tmpdir/new.bin" of="$tmpdir/expected.img" bs=512 seek=$(( woff / 512 )) \
  conv=notrunc status=none

t "$NBDKIT" -r -U - $hs guestfs disk="$tmpdir/disk.img" mount=/dev/sda1:/ \
  export=/nosuch.bin --run 'nbdsh -u "$uri" -c pass' > "$tmpdir/bad.out" 2>&1 &
bad=$!
t "$NBDKIT" -U - $hs guestfs format=raw disk="$tmpdir/disk.img" \
  export=/dev/sda1 --run 'nbdsh -u "$uri" -c "
import os
t = os.environ[\"tmpdir\"]
size = h.get_size()
assert size == '$part_size', size
assert not h.is_read_only()
with open(t + \"/read.img\", \"wb\") as f:
    for off in range(0, size, 2 * 1024 * 1024):
        f.write(h.pread(min(2 * 1024 * 1024, size - off), off))
new = open(t + \"/new.bin\", \"rb\").read()
h.pwrite(new, '$woff')
assert h.pread(len(new), '$woff') == new
h.flush()
"' || fail "reading or writing /dev/sda1 failed"
wait $bad && { cat "$tmpdir/bad.out"; fail "a missing file was served"; }
grep -q "error: guestfs: export=/nosuch.bin: .*No such file" "$tmpdir/bad.out" ||
  { cat "$tmpdir/bad.out"; fail "no reason given for the missing file"; }
! grep -q "error: guestfs: mount" "$tmpdir/bad.out" ||
  { cat "$tmpdir/bad.out"; fail "mount=/dev/sda1:/ failed"; }

cmp "$tmpdir/part.img" "$tmpdir/read.img" ||
  fail "the bytes read differ from the partition's"
partition_bytes "$tmpdir/after.img"
cmp "$tmpdir/expected.img" "$tmpdir/after.img" ||
  fail "the image does not hold exactly what was written"

interrupt_tracer "$bt"
grep -qx "launch ro=0 result=0 timed=1" "$tmpdir/trace" &&
  grep -qx "launch ro=1 result=0 timed=1" "$tmpdir/trace" ||
  { cat "$tmpdir/trace"; fail "no guestfs_launch probes, or wrong ones"; }
[ "$(grep -c '^export' "$tmpdir/trace")" -eq 1 ] &&
  grep -qx "export /dev/sda1 $part_size" "$tmpdir/trace" ||
  { cat "$tmpdir/trace"; fail "guestfs_export should fire once, for sda1"; }
! grep '^bad' "$tmpdir/trace" || fail "a piece failed or had bad arguments"
# Reads: 5 x 1 MiB, then the read-back in 1 MiB + 0.5 MiB; the write
# likewise in two pieces.
grep -A3 '^@pieces' "$tmpdir/trace" | grep -qx '@pieces\[0\]: 7' &&
  grep -A3 '^@pieces' "$tmpdir/trace" | grep -qx '@pieces\[1\]: 2' &&
  grep -qx '@max\[0\]: 1048576' "$tmpdir/trace" &&
  grep -qx '@max\[1\]: 1048576' "$tmpdir/trace" ||
  { cat "$tmpdir/trace"; fail "reads and writes not cut in 1 MiB pieces"; }

# Refused at start-up, before any appliance.
refuses "disk=$tmpdir/nosuch.img: No such file" \
  guestfs disk="$tmpdir/nosuch.img" export=/dev/sda1 ||
  fail "a missing disk was not refused"
refuses 'export= is required' guestfs disk="$tmpdir/disk.img" ||
  fail "a missing export= was not refused"
refuses 'export=sda1: .*starts with /' \
  guestfs disk="$tmpdir/disk.img" export=sda1 ||
  fail "a relative export= was not refused"
refuses 'disk= or domain= is required' guestfs export=/dev/sda1 ||
  fail "no disk was not refused"
