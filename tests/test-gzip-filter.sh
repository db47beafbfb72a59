#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=gzip serves what a gzip file uncompresses to, read-only: the
# same size, flags, map and bytes as Debian's nbdkit 1.32 gzip filter on
# the same command, and what gzip -d gives, also through nbdcopy's
# parallel connections.  Bad input (truncated, corrupt, not gzip, too
# large for gzip-max-size) fails the connection with a clear error, and
# a later connection, once the file is good, succeeds.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd gzip

raw="$tmpdir/disk.raw"
make_pattern "$raw" $(( 3 * 1024 * 1024 + 12345 ))
sha="$(sha256sum < "$raw")"
gzip -c -6 "$raw" > "$tmpdir/disk.gz"

# --- The same command on both servers ------------------------------------
compare_own gzip read --filter=gzip file "$tmpdir/disk.gz"
expect_in gzip-bytes "$ours" "^copy-all $sha\$"
expect_in gzip-size "$ours" "export-size=$(stat -c %s "$raw") is_read_only=True"
# Writes fail (the export is read-only) and leave the file as it was.
cp "$tmpdir/disk.gz" "$tmpdir/w.gz.orig"
state_files=("$tmpdir/w.gz")
compare_own gzip-write write --filter=gzip file "$tmpdir/w.gz"
expect_in gzip-write-refused "$ours" "^pwrite error"
expect_in gzip-write-state "$ours" \
  "^state w.gz $(sha256sum < "$tmpdir/disk.gz")\$"
state_files=()
# An empty file compresses to a valid gzip stream: an empty export.
: | gzip -c > "$tmpdir/empty.gz"
compare_own gzip-empty read --filter=gzip file "$tmpdir/empty.gz"
expect_in gzip-empty-size "$ours" "^export-size=0 "
finish

# --- Parallel clients ------------------------------------------------------
# nbdcopy with four connections and many requests in flight, through
# one server that inflates once.
start_server --filter=gzip file "$tmpdir/disk.gz"
pids=()
for i in 1 2; do
  t nbdcopy --connections=4 --requests=32 --request-size=65536 \
    "$uri" "$tmpdir/copy$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do
  wait "$p" || fail "nbdcopy failed"
done
for i in 1 2; do
  cmp "$raw" "$tmpdir/copy$i" || fail "nbdcopy copy $i differs from gzip -d"
done
t nbdsh -u "$uri" -c - <<'PY'
import errno
assert h.is_read_only()
assert h.can_multi_conn()
try:
    h.pwrite(b"x" * 512, 0)
    raise AssertionError("write to the gzip export succeeded")
except nbd.Error as e:
    assert e.errnum in (errno.EPERM, errno.EROFS), e
PY
stop_server

# --- Several gzip members, trailing bytes ---------------------------------
# RFC 1952: a gzip file is a series of members; gzip -d uncompresses all
# of them.  Debian's filter (1.32) serves only the first, so this checks
# the right answer, gzip -d's, rather than comparing.
head -c 100000 /dev/urandom > "$tmpdir/part2"
gzip -c "$tmpdir/part2" > "$tmpdir/part2.gz"
cat "$tmpdir/disk.gz" "$tmpdir/part2.gz" "$tmpdir/part2.gz" > "$tmpdir/multi.gz"
gzip -dc "$tmpdir/multi.gz" > "$tmpdir/multi.expected"
t "$NBDKIT" -U - --filter=gzip file "$tmpdir/multi.gz" \
  --run "nbdcopy \"\$uri\" $tmpdir/multi.got"
cmp "$tmpdir/multi.expected" "$tmpdir/multi.got" ||
  fail "several members: not what gzip -d gives"
# Bytes after the last member that are not gzip are ignored, as gzip -d
# ignores them (with a warning).
{ cat "$tmpdir/disk.gz"; printf 'trailing junk\0\0\0'; } > "$tmpdir/junk.gz"
t "$NBDKIT" -U - --filter=gzip file "$tmpdir/junk.gz" \
  --run "nbdcopy \"\$uri\" $tmpdir/junk.got"
cmp "$raw" "$tmpdir/junk.got" || fail "trailing bytes changed the content"

# --- Bad input: one clear error, and the server lives on -------------------
# check_bad FILE REGEX: a client of a server on FILE fails to connect,
# and the server's log has REGEX.
check_bad ()
{
  local file="$1" regex="$2" status=0
  t "$NBDKIT" -U - --filter=gzip file "$file" "${@:3}" \
    --run 'nbdinfo --size "$uri"' > "$tmpdir/bad.out" 2> "$tmpdir/bad.err" ||
    status=$?
  [ "$status" -ne 0 ] ||
    fail "$file ${*:3}: a client connected: $(cat "$tmpdir/bad.out")"
  grep -Eq -- "$regex" "$tmpdir/bad.err" ||
    { cat "$tmpdir/bad.err"; fail "$file: no /$regex/ in the server's log"; }
}
size=$(stat -c %s "$tmpdir/disk.gz")
head -c $(( size / 2 )) "$tmpdir/disk.gz" > "$tmpdir/trunc.gz"
check_bad "$tmpdir/trunc.gz" \
  'gzip\[1\]: error: the compressed data ends before the end of the gzip stream'
# Only the 8-byte trailer missing: the CRC cannot be checked.
head -c $(( size - 8 )) "$tmpdir/disk.gz" > "$tmpdir/notrailer.gz"
check_bad "$tmpdir/notrailer.gz" 'ends before the end of the gzip stream'
check_bad "$raw" 'error: the compressed data is not valid gzip .*header'
: > "$tmpdir/zero-length"
check_bad "$tmpdir/zero-length" 'ends before the end of the gzip stream'
# A flipped byte in the middle: a data error or a CRC mismatch.
cp "$tmpdir/disk.gz" "$tmpdir/corrupt.gz"
printf '\xff\x00\xff\x00' |
  dd of="$tmpdir/corrupt.gz" bs=1 seek=$(( size / 2 )) conv=notrunc status=none
check_bad "$tmpdir/corrupt.gz" 'error: the compressed data is not valid gzip'
# gzip-max-size: one byte short of the content is refused, the exact
# size is served.
rawsize=$(stat -c %s "$raw")
check_bad "$tmpdir/disk.gz" 'larger than gzip-max-size=' \
  gzip-max-size=$(( rawsize - 1 ))
t "$NBDKIT" -U - --filter=gzip file "$tmpdir/disk.gz" gzip-max-size=$rawsize \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = "$rawsize" ] || fail "gzip-max-size=$rawsize"
# TMPDIR names where the content goes: a missing one is an error.
TMPDIR="$tmpdir/no-such-dir" check_bad "$tmpdir/disk.gz" \
  'cannot create a temporary file in .*/no-such-dir'

# A failed inflation is not remembered: once the file is whole again,
# the next connection to the same server gets the content.
cp "$tmpdir/trunc.gz" "$tmpdir/later.gz"
start_server --filter=gzip file "$tmpdir/later.gz"
expect_fail t nbdinfo --size "$uri" 2>/dev/null ||
  fail "a truncated file was served"
cp "$tmpdir/disk.gz" "$tmpdir/later.gz"
t nbdcopy "$uri" "$tmpdir/later.got"
cmp "$raw" "$tmpdir/later.got" || fail "retry after a failed inflation"
stop_server

# --- Bad parameters --------------------------------------------------------
status=0
t "$NBDKIT" -U - --filter=gzip file "$tmpdir/disk.gz" gzip-max-size=lots \
  --run true 2> "$tmpdir/err" || status=$?
[ "$status" -eq 1 ] || fail "gzip-max-size=lots: exit status $status"
[ "$(wc -l < "$tmpdir/err")" -eq 1 ] &&
  grep -q '^nbdkit: gzip: error: gzip-max-size: could not parse size' \
    "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "gzip-max-size=lots: wrong message"; }
