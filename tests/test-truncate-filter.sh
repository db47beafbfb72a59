#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=truncate: the export takes the size truncate=, round-up= and
# round-down= give it; past the plugin's end it reads zeroes, maps as
# a hole, takes writes of zeroes and refuses others with ENOSPC (leaving
# the file untouched).  Same bytes, map and written state as Debian's
# nbdkit with its own truncate filter; bad values exit 1 naming the key.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

# A file whose size is not a multiple of 512, with data and holes.
disk="$tmpdir/disk.img"
make_pattern "$disk" $((1024 * 1024 + 1000))
cp "$disk" "$disk.orig"

# --- Same as Debian's nbdkit ------------------------------------------------
compare_own truncate-larger read --filter=truncate file "$disk" truncate=2M
expect_in truncate-larger-size "$ours" 'export-size=2097152 '
compare_own truncate-smaller read --filter=truncate file "$disk" \
  truncate=300000
compare_own truncate-round-up read --filter=truncate file "$disk" \
  round-up=4096
expect_in truncate-round-up-size "$ours" 'export-size=1052672 '
compare_own truncate-round-down read --filter=truncate file "$disk" \
  round-down=64k
compare_own truncate-all-three read --filter=truncate file "$disk" \
  truncate=700001 round-up=512 round-down=4k

state_files=("$disk")
compare_own truncate-write-larger write --filter=truncate file "$disk" \
  truncate=3M
compare_own truncate-write-smaller write --filter=truncate file "$disk" \
  truncate=500000
state_files=()

# --- The tail, by hand ----------------------------------------------------
cp "$disk.orig" "$disk"
start_server --filter=truncate file "$disk" truncate=2M
t nbdsh -u "$uri" -c - <<PY
import errno
real = $((1024 * 1024 + 1000))
disk = open("$disk", "rb").read()
assert h.get_size() == 2 * 1024 * 1024, h.get_size()
# A read across the plugin's end: its data, then zeroes.
buf = h.pread(8192, real - 4096)
assert buf == disk[real - 4096:] + bytes(4096), "read across the end"
assert h.pread(4096, 2 * 1024 * 1024 - 4096) == bytes(4096)
# Zeroes may be written in the tail; the part before the end is stored.
h.pwrite(b"A" * 100 + bytes(500), real - 100)
h.pwrite(bytes(65536), real + 4096)
h.zero(65536, real + 8192)
h.trim(4096, real + 4096)
# Non-zero data in the tail is refused, even when most of it is zero,
# and the part before the end is not written either.
for off in (real + 10, real - 50):
    try:
        h.pwrite(b"B" * 100, off)
    except nbd.Error as ex:
        assert ex.errnum == errno.ENOSPC, ex
    else:
        raise AssertionError("non-zero write past the end succeeded")
h.flush()
assert h.pread(200, real - 100) == b"A" * 100 + bytes(100)
PY
stop_server
[ "$(stat -c %s "$disk")" -eq $((1024 * 1024 + 1000)) ] ||
  fail "the file's size changed: $(stat -c %s "$disk")"
[ "$(tail -c 100 "$disk")" = "$(printf 'A%.0s' $(seq 100))" ] ||
  fail "the write before the plugin's end did not land"

# --- Bad parameters: exit 1, one line naming the key ----------------------
bad ()
{
  refuses "$1" --filter=truncate null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad '^nbdkit: truncate: error: truncate: .*\(abc\)' truncate=abc
bad '^nbdkit: truncate: error: truncate: .*\(-1\)' truncate=-1
bad '^nbdkit: truncate: error: round-up: must be > 0' round-up=0
bad '^nbdkit: truncate: error: round-up: 3 is not a power of 2' round-up=3
bad '^nbdkit: truncate: error: round-down: 5G is too large' round-down=5G
bad "^nbdkit: null: error: unknown parameter 'bogus'" bogus=1
# A size that cannot be rounded up fails the connection, not the server.
t "$NBDKIT" -U - --filter=truncate null 1M truncate=9223372036854775807 \
  round-up=512 --run 'nbdinfo --size "$uri"' > "$tmpdir/big.out" 2>&1 &&
  fail "rounding INT64_MAX up succeeded"
grep -q 'cannot round size' "$tmpdir/big.out" ||
  { cat "$tmpdir/big.out"; fail "no rounding error"; }

finish
