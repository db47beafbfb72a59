#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=cache under concurrency, in each mode and while evicting:
# four clients at once, each with 32 writes in flight, write interleaved
# pieces whose edges fall inside 64K blocks (so fills, write-backs and
# evictions of one block race between clients), with reads mixed in;
# then three nbdcopy copies out at once, each over several connections,
# must give the expected bytes, and after a flush so must the file.
# Debian's delay filter under the cache slows every plugin read and
# write by 1 ms so that the races have room to happen.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy
delay=/usr/lib/x86_64-linux-gnu/nbdkit/filters/nbdkit-delay-filter.so
requires test -f "$delay"

disk="$tmpdir/disk.img"
size=$((8 * 1024 * 1024))
/usr/bin/python3 -c "
import sys
sys.stdout.buffer.write(bytes((i * 7 + i // 4096) % 256 for i in range($size)))
" > "$disk.orig"

cat > "$tmpdir/writer.py" <<'PY'
import sys
client, nclients, piece, size = (int(x) for x in sys.argv[1:5])
for j in range(client, size // piece, nclients):
    data = bytes([(j * 31 + client) % 251 + 1]) * piece
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), j * piece)
    # A read of a piece another client owns, to mix fills in.
    h.aio_pread(nbd.Buffer(4096), ((j * 7919) % (size // 4096)) * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.shutdown()
PY
cat > "$tmpdir/expect.py" <<'PY'
import sys
path, out, nclients, piece = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = bytearray(open(path, "rb").read())
for j in range(len(data) // piece):
    client = j % nclients
    data[j * piece:(j + 1) * piece] = bytes([(j * 31 + client) % 251 + 1]) * piece
open(out, "wb").write(data)
PY
piece=12289
/usr/bin/python3 "$tmpdir/expect.py" "$disk.orig" "$tmpdir/expected" 4 $piece

run ()
{
  local label="$1" i p pids=()
  shift
  cp "$disk.orig" "$disk"
  start_server --filter=cache --filter="$delay" file "$disk" \
    rdelay=1ms wdelay=1ms "$@"
  for i in 0 1 2 3; do
    t nbdsh -u "$uri" \
      -c "import sys; sys.argv = ['w', '$i', '4', '$piece', '$size']" \
      -c "exec(open('$tmpdir/writer.py').read())" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "$label: a writer failed"; done
  pids=()
  for i in 0 1 2; do
    t nbdcopy --connections=4 --requests=32 "$uri" "$tmpdir/out$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "$label: an nbdcopy failed"; done
  for i in 0 1 2; do
    cmp "$tmpdir/expected" "$tmpdir/out$i" ||
      fail "$label: parallel copy $i differs from the bytes written"
  done
  t nbdsh -u "$uri" -c 'h.flush()'
  stop_server
  if [ "$label" != unsafe ]; then
    cmp "$tmpdir/expected" "$disk" ||
      fail "$label: the file differs from the bytes written after flush"
  fi
}

run writeback-evicting cache-max-size=1M
run writethrough cache=writethrough cache-on-read=true cache-max-size=1M
run unsafe cache=unsafe cache-on-read=true
