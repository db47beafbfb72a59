#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The file plugin's page cache options, seen in strace and in the page
# cache itself (fincore):
#  - fadvise=normal|random|sequential gives that hint for the whole file
#    (posix_fadvise offset 0, length 0) on each descriptor it opens;
#  - cache=none drops each read's pages (POSIX_FADV_DONTNEED) and starts
#    the writeback of each write (sync_file_range), dropping its pages
#    once written, so after a copy in and out the file is barely in the
#    page cache, where cache=default leaves it there; reads then never
#    use sendfile, which would keep them cached;
#  - bad values are one clear error.
# Bytes read back are checked every time.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdcopy strace sha256sum fincore

src="$tmpdir/src.img"
disk="$tmpdir/disk.img"
head -c 32M /dev/urandom > "$src"
want="$(sha256sum < "$src")"

# Run the server under strace (only the server: a --run command would
# be traced too) for one copy in and out, checking the bytes.  The
# trace is $tmpdir/trace.NAME.
kill_quietly () { kill "$1" 2>/dev/null || :; }
traced () {
  local name="$1" out="$tmpdir/out.img" i spid
  local sock="$tmpdir/sock.$name" pidfile="$tmpdir/pid.$name"
  shift
  rm -f "$out" "$disk"
  truncate -s 32M "$disk"
  # LeakSanitizer cannot work under ptrace: no leak check for this one.
  env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  strace -f -qq -o "$tmpdir/trace.$name" \
    -e trace=fadvise64,sync_file_range,sendfile \
    "$NBDKIT" -f -U "$sock" -P "$pidfile" file "$disk" "$@" &
  spid=$!
  cleanup_fn kill_quietly "$spid"
  for i in $(seq 100); do
    [ -S "$sock" ] && [ -s "$pidfile" ] && break
    sleep 0.1
  done
  [ -S "$sock" ] || fail "$*: the server did not start"
  t nbdcopy "$src" "nbd+unix://?socket=$sock" &&
    t nbdcopy "nbd+unix://?socket=$sock" "$out" ||
    fail "$*: the copy failed"
  kill "$(cat "$pidfile")"
  wait "$spid" || :
  [ "$(sha256sum < "$out")" = "$want" ] || fail "$*: bytes differ"
}

for mode in normal random sequential; do
  traced "$mode" fadvise="$mode"
  want_mode=$(echo "$mode" | tr a-z A-Z)
  grep -E "fadvise64\([0-9]+, 0, 0, POSIX_FADV_$want_mode\) = 0" \
    "$tmpdir/trace.$mode" ||
    fail "fadvise=$mode: no posix_fadvise(fd, 0, 0, POSIX_FADV_$want_mode)"
done

# Resident pages of the file, in 4 KiB pages (fincore's RES in bytes).
resident () { fincore -b -n -o RES "$disk" | tr -d ' '; }

traced default cache=default
res_default=$(resident)
grep -q 'POSIX_FADV_DONTNEED' "$tmpdir/trace.default" &&
  fail "cache=default dropped pages"
grep -q 'sendfile' "$tmpdir/trace.default" ||
  fail "cache=default: reads did not use sendfile"

traced none cache=none
res_none=$(resident)
echo "resident after a copy in and out: cache=default $res_default bytes," \
  "cache=none $res_none bytes"
n=$(grep -c 'POSIX_FADV_DONTNEED' "$tmpdir/trace.none" || :)
[ "$n" -ge 32 ] || fail "cache=none: only $n POSIX_FADV_DONTNEED calls"
grep -q 'sync_file_range' "$tmpdir/trace.none" ||
  fail "cache=none: writes never started their writeback"
grep -q 'sendfile' "$tmpdir/trace.none" &&
  fail "cache=none: reads used sendfile"
[ "$res_default" -ge $(( 16 * 1048576 )) ] ||
  fail "cache=default: only $res_default bytes cached, the comparison means nothing"
[ "$res_none" -le $(( 4 * 1048576 )) ] ||
  fail "cache=none: $res_none bytes of the file still cached"

for bad in cache=maybe fadvise=often; do
  status=0
  "$NBDKIT" file "$disk" "$bad" --run true 2> "$tmpdir/err" || status=$?
  cat "$tmpdir/err"
  [ "$status" -eq 1 ] || fail "$bad: exit status $status, not 1"
  grep -q "file: error: $bad: must be" "$tmpdir/err" || fail "$bad: no clear error"
done
