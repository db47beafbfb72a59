#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Filters that adjust requests and pass them on to an asynchronous
# plugin (nbdkit_async_filter_ops): truncate, blocksize, cow, cache.
# Each stack runs the same mix of writes, zeroes, trims and reads of
# every alignment twice, with the asynchronous path (default) and
# without it (-D nbdkit.async=0), and must give the client the same
# disk (a checksum of every byte) both times, while the plugin is
# handed some requests the first time (example-async reports how many
# when a connection closes) and none the second.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

cat > "$tmpdir/mix.py" <<'PY'
import hashlib
size = h.get_size()
digest = hashlib.sha256()
# Each call's outcome (or its errno) goes into the sum too.
def call(fn, *args):
    try:
        r = fn(*args)
        digest.update(r if isinstance(r, bytes) else b"ok")
    except nbd.Error as e:
        digest.update(("errno %s" % e.errno).encode())
if not h.is_read_only():
    call(h.pwrite, b"\x11" * 65536, 0)
    call(h.pwrite, b"\x22" * 5000, 70001)
    call(h.pwrite, bytes(range(256)) * 16, 131072)
    call(h.pwrite, b"\x33" * 1000, size - 1000)
    call(h.pwrite, bytes(1000), size - 1000)
    call(h.zero, 8192, 40960)
    call(h.zero, 3000, 100003, nbd.CMD_FLAG_NO_HOLE)
    call(h.zero, 4096, size - 4096)
    if h.can_trim():
        call(h.trim, 16384, 196608)
    if h.can_fua():
        call(h.pwrite, b"\x44" * 4096, 262144, nbd.CMD_FLAG_FUA)
    call(h.flush)
for off, n in ((0, 4096), (512, 65536), (70000, 7), (131072, 32768),
               (size - 4096, 4096)):
    call(h.pread, n, off)
off = 0
while off < size:
    n = min(65536, size - off)
    digest.update(h.pread(n, off))
    off += n
print("size", size, "sum", digest.hexdigest())
PY

# run_mix NAME ASYNC ARGS...: prints the client's sum and how many
# requests the plugin was handed.
run_mix ()
{
  local name="$1" async="$2"
  shift 2
  "$NBDKIT" -v -D nbdkit.async="$async" -U - "$@" \
    --run 'nbdsh -u "$uri" -c "exec(open(\"'"$tmpdir/mix.py"'\").read())"' \
    > "$tmpdir/out" 2> "$tmpdir/log" ||
    { cat "$tmpdir/log" "$tmpdir/out"; fail "$name (async=$async)"; }
  sed -n 's/.*close: \([0-9]*\) requests submitted.*/\1/p' "$tmpdir/log" \
    > "$tmpdir/handed"
  echo "$name async=$async: $(cat "$tmpdir/out"), handed $(cat "$tmpdir/handed")"
}

# stack NAME MIN ARGS...: the same sum both ways; at least MIN requests
# handed over the asynchronous way, none the other.
stack ()
{
  local name="$1" min="$2" sum handed
  shift 2
  run_mix "$name" 1 "$@"
  sum="$(cat "$tmpdir/out")" handed="$(cat "$tmpdir/handed")"
  run_mix "$name" 0 "$@"
  [ "$sum" = "$(cat "$tmpdir/out")" ] ||
    fail "$name: the client saw different bytes with the asynchronous path"
  [ "$handed" -ge "$min" ] ||
    fail "$name: only $handed requests handed over asynchronously"
  [ "$(cat "$tmpdir/handed")" -eq 0 ] ||
    fail "$name: requests handed over with -D nbdkit.async=0"
}

plugin=(example-async size=1M delay=0)
# A tail past the plugin's end reads as zeroes (synchronous); the rest
# passes.
stack truncate-up 20 --filter=truncate "${plugin[@]}" truncate=1100000
stack truncate-down 20 --filter=truncate "${plugin[@]}" truncate=1000000
# Aligned reads within maxdata pass; with minblock, writes do not.
stack blocksize-min 3 --filter=blocksize "${plugin[@]}" minblock=4096 \
  maxdata=16384
stack blocksize-max 10 --filter=blocksize "${plugin[@]}" maxdata=16384
# Reads of blocks never written pass; writes stay in the overlay.
stack cow 10 --filter=cow "${plugin[@]}"
stack cache 10 --filter=cache "${plugin[@]}"
# Two adjusting filters and a transparent one, one above the other.
stack offset-truncate 20 --filter=offset --filter=truncate --filter=nozero \
  "${plugin[@]}" offset=4096 truncate=1000000
# Blocksize's read-modify-writes go the synchronous way through offset,
# its aligned reads the asynchronous way: a shift that differed between
# the two paths would show in the bytes read back.
stack blocksize-offset 10 --filter=blocksize --filter=offset "${plugin[@]}" \
  minblock=4096 offset=4096
