#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=cow under concurrency: four clients at once, each with 32
# writes in flight, write interleaved pieces whose edges fall inside
# 64K blocks (so copy-ups of one block race between clients); then
# three nbdcopy copies out at once, each with several connections, must
# all give the expected bytes; then nbdcopy writes a whole disk in over
# several connections and reads it back.  The plugin's file never
# changes.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdcopy sha256sum

disk="$tmpdir/disk.img"
size=$((16 * 1024 * 1024))
/usr/bin/python3 -c "
import sys
sys.stdout.buffer.write(bytes((i * 7 + i // 4096) % 256 for i in range($size)))
" > "$disk"
before="$(sha256sum < "$disk")"

# The writes of client I: pieces of PIECE bytes, piece J belonging to
# client J % 4, filled with a byte naming client and piece.
cat > "$tmpdir/writer.py" <<'PY'
import sys
client, nclients, piece, size = (int(x) for x in sys.argv[1:5])
bufs = []
for j in range(client, size // piece, nclients):
    data = bytes([(j * 31 + client) % 251 + 1]) * piece
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), j * piece)
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
/usr/bin/python3 "$tmpdir/expect.py" "$disk" "$tmpdir/expected" 4 $piece

# Debian's delay filter under cow makes every read of the plugin (a
# copy-up) take 2 ms, so that racing copy-ups of one block overlap.
delay=/usr/lib/x86_64-linux-gnu/nbdkit/filters/nbdkit-delay-filter.so
requires test -f "$delay"
start_server --filter=cow --filter="$delay" file "$disk" rdelay=2ms
pids=()
for i in 0 1 2 3; do
  t nbdsh -u "$uri" -c "import sys; sys.argv = ['w', '$i', '4', '$piece', '$size']" \
    -c "exec(open('$tmpdir/writer.py').read())" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a writer failed"; done

pids=()
for i in 0 1 2; do
  t nbdcopy --connections=4 --requests=32 "$uri" "$tmpdir/out$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "an nbdcopy out failed"; done
for i in 0 1 2; do
  cmp "$tmpdir/expected" "$tmpdir/out$i" ||
    fail "parallel copy $i differs from the bytes written"
done

# A whole disk in by nbdcopy over four connections, then out again.
head -c $size /dev/urandom > "$tmpdir/random"
t nbdcopy --connections=4 --requests=64 "$tmpdir/random" "$uri"
t nbdcopy "$uri" "$tmpdir/back"
cmp "$tmpdir/random" "$tmpdir/back" || fail "nbdcopy in and out differ"

stop_server
[ "$(sha256sum < "$disk")" = "$before" ] || fail "the plugin's file changed"
