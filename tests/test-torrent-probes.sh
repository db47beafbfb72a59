#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The torrent plugin's probes, and what they show: reads of pieces of
# a file still downloading are served ahead of the rest.  The seeder
# uploads 8 MiB (512 pieces) at 1 MiB/s, so the whole file takes ~8 s,
# from the moment the first read is on its way (the seeder holds back
# until then, so no piece read can have arrived before its read); three
# reads one after another (pieces 511, 300, 150) must each wait
# for its own piece only (wait_start: first = last = that piece, 1
# missing; wait_done: same id and cookie, 0 left), and at most 32 other
# pieces may arrive during each wait: without the priority a piece
# comes at a random place among the ~500 left.  torrent_ready names the
# file, its size and the pieces.
source "$(dirname "$0")/torrent-seed.sh"
torrent_netns "$0" "$@"
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh
export PATH=/usr/bin:$PATH

so="$abs_top_builddir/plugins/torrent/.libs/nbdkit-torrent-plugin.so"
[ -f "$so" ] || fail "$so not built"
size=$(( 8 * 1024 * 1024 ))
mkdir "$tmpdir/data"
head -c $size /dev/urandom > "$tmpdir/data/disk.img"
seed_torrent "$tmpdir/data" 16 $(( 1024 * 1024 )) hold

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:torrent_ready {
  printf("%llu ready %s %s %d %d %d\n", nsecs, str(arg0), str(arg1), arg2,
         arg3, arg4); }
usdt:$so:nbdkit:torrent_wait_start {
  printf("%llu start %d %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3, arg4); }
usdt:$so:nbdkit:torrent_wait_done {
  printf("%llu done %d %d %d %d\n", nsecs, arg0, arg1, arg2, arg3); }
usdt:$so:nbdkit:torrent_piece { printf("%llu piece %d\n", nsecs, arg0); }
BT
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

t "$NBDKIT" -U - torrent "$tmpdir/t.torrent" cache="$tmpdir/cache" \
  --run "nbdsh -u \"\$uri\" -c '
import os, signal
with open(\"$tmpdir/data/disk.img\", \"rb\") as f:
    for p in (511, 300, 150):
        f.seek(p * 16384 + 1000)
        buf = nbd.Buffer(4096)
        c = h.aio_pread(buf, p * 16384 + 1000)
        if p == 511:
            os.kill($seeder_pid, signal.SIGUSR1)
        while not h.aio_command_completed(c):
            h.poll(-1)
        assert buf.to_bytearray() == f.read(4096)
'" || fail "the reads failed"
sleep 0.5
interrupt_tracer "$bt"
trace_in_order "$tmpdir/trace" > "$tmpdir/events"

grep -qx "ready data data/disk.img $size 16384 512" "$tmpdir/events" ||
  { cat "$tmpdir/events"; fail "no torrent_ready line"; }
# Each read: its start, its done, and the pieces in between.
awk '
  $1 == "start" { n++; id = $2; ck = $3; p = $4; between = 0
    if ($2 < 1 || $3 < 1 || $4 != $5 || $6 != 1) { print "bad:", $0; bad = 1 }
    next }
  $1 == "piece" && n == 0 { early++; next }
  $1 == "piece" && id != "" { between++; next }
  $1 == "done" {
    if ($2 != id || $3 != ck || $4 != 0) { print "bad:", $0; bad = 1 }
    print "read of piece " p ": " between " pieces arrived meanwhile"
    if (between > 32) bad = 1
    id = "" }
  END { if (n != 3) { print n " waits, not 3"; bad = 1 }
        if (early) { print early " pieces came before the first read"; bad = 1 }
        exit bad }
' "$tmpdir/events" > "$tmpdir/summary" ||
  { cat "$tmpdir/summary" "$tmpdir/events" | head -60
    fail "the reads were not served ahead of the download"; }
cat "$tmpdir/summary"
awk '$1 == "start" { print $4 }' "$tmpdir/events" | tr '\n' ' ' |
  grep -qx '511 300 150 ' || fail "the waits were not for pieces 511, 300, 150"
