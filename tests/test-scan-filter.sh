#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=scan prefetches the whole disk, scan-size bytes at a time,
# as nbdkit 1.32's filter does (the prefetches seen through Debian's
# log filter below it, slowed by Debian's delay filter so that a
# client's reads and disconnects land at known points of the scan):
# scan-ahead jumps past a client's read, scan-clock resumes the next
# connection where the last one stopped, scan-forever starts again at
# the end.  Data read through it is unchanged; it warns (and does not
# scan) for another export, a serialising stack or no native prefetch;
# bad parameters are refused naming the parameter.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"

log_so="$debian_filterdir/nbdkit-log-filter.so"
delay_so="$debian_filterdir/nbdkit-delay-filter.so"
disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((1024 * 1024))
cp "$disk.orig" "$disk"

# scan CLIENT-PYTHON...: run nbdsh with each argument as one
# connection's script, then print the prefetches the layer below saw,
# by connection, in order.
cat > "$tmpdir/scan" <<'SH'
#!/bin/sh
dir="$(dirname "$0")"
uri="$1"
shift
for py; do
  nbdsh -u "$uri" -c "import time" -c "$py" || exit 1
done
sed -n 's/.*\(connection=[0-9]*\) Cache id=[0-9]* \(offset=[^ ]* count=[^ ]*\).*/\1 \2/p' \
  "$dir/cache.log"
SH
chmod +x "$tmpdir/scan"
logargs=(--filter="$log_so" --filter="$delay_so" file "$disk"
         logfile="$tmpdir/cache.log")

# The whole disk, in order, to the end (the last block cut short).
cat > "$tmpdir/whole" <<SH
#!/bin/sh
exec $tmpdir/scan "\$1" "time.sleep(1)"
SH
chmod +x "$tmpdir/whole"
compare_own scan-whole "$tmpdir/whole" --filter=scan "${logargs[@]}" \
  scan-size=96K scan-size=64K  # the last one counts
expect_in scan-whole "$ours" '^connection=1 offset=0x0 count=0x10000$'
expect_in scan-whole "$ours" '^connection=1 offset=0xf0000 count=0x10000$'
[ "$(grep -c '^connection=1 ' "$ours")" -eq 16 ] ||
  note_failure scan-whole "expected 16 prefetches: $(cat "$ours")"

# scan-ahead: a read during the first (slow) prefetch moves the scan
# to the end of that read; without scan-ahead it does not.
cat > "$tmpdir/ahead" <<SH
#!/bin/sh
exec $tmpdir/scan "\$1" "time.sleep(0.1); h.pread(4096, 1048576 - 65536 - 4096); time.sleep(1.3)"
SH
chmod +x "$tmpdir/ahead"
compare_own scan-ahead "$tmpdir/ahead" --filter=scan "${logargs[@]}" \
  scan-size=64K delay-cache=500ms
expect_in scan-ahead "$ours" '^connection=1 offset=0xf0000 count=0x10000$'
[ "$(grep -c '^connection=1 ' "$ours")" -eq 2 ] ||
  note_failure scan-ahead "expected 2 prefetches: $(cat "$ours")"
cat > "$tmpdir/noahead" <<SH
#!/bin/sh
exec $tmpdir/scan "\$1" "time.sleep(0.1); h.pread(4096, 1048576 - 65536 - 4096); time.sleep(0.7)"
SH
chmod +x "$tmpdir/noahead"
compare_own scan-ahead-false "$tmpdir/noahead" --filter=scan \
  "${logargs[@]}" scan-size=64K delay-cache=500ms scan-ahead=false
expect_in scan-ahead-false "$ours" '^connection=1 offset=0x10000 count=0x10000$'

# scan-clock: the second connection resumes where the first one's last
# prefetch was (0x80000, reached by scan-ahead: its client leaves while
# that 500 ms prefetch runs, from 0.5 s to 1 s), or with
# scan-clock=false starts again from 0.
cat > "$tmpdir/clock" <<SH
#!/bin/sh
exec $tmpdir/scan "\$1" "time.sleep(0.1); h.pread(4096, 524288 - 4096); time.sleep(0.6)" "time.sleep(0.1)"
SH
chmod +x "$tmpdir/clock"
compare_own scan-clock "$tmpdir/clock" --filter=scan "${logargs[@]}" \
  scan-size=64K delay-cache=500ms
expect_in scan-clock "$ours" '^connection=2 offset=0x80000 count=0x10000$'
compare_own scan-clock-false "$tmpdir/clock" --filter=scan "${logargs[@]}" \
  scan-size=64K delay-cache=500ms scan-clock=false
expect_in scan-clock-false "$ours" '^connection=2 offset=0x0 count=0x10000$'

# scan-forever: after the end it starts again from 0 (how many rounds
# depends on timing, so only ours is checked).
t "$NBDKIT" -U - --filter=scan "${logargs[@]}" scan-size=256K \
  scan-forever=true --run "$tmpdir/scan \"\$uri\" 'time.sleep(0.5)'" \
  > "$tmpdir/forever" || fail "scan-forever run failed"
[ "$(grep -c 'offset=0x0 ' "$tmpdir/forever")" -ge 2 ] &&
  grep -q 'offset=0xc0000 ' "$tmpdir/forever" ||
  { cat "$tmpdir/forever"; fail "scan-forever did not scan again"; }

# Bytes and map are those of the plugin, alone and over a cache.
compare_own scan-read read --filter=scan file "$disk"
compare_own scan-cache-read read --filter=scan \
  --filter="$debian_filterdir/nbdkit-cache-filter.so" file "$disk" \
  scan-size=64K
state_files=("$disk")
compare_own scan-write write --filter=scan file "$disk"
state_files=()
t "$NBDKIT" -U - --filter=scan memory 32M scan-size=1M --run '
  nbdcopy '"$disk.orig"' "$uri" &&
  nbdcopy --connections=4 "$uri" '"$tmpdir/copy"'
' || fail "nbdcopy through scan failed"
cmp -n $((1024 * 1024)) "$disk.orig" "$tmpdir/copy" ||
  fail "nbdcopy read back different data"

# Warnings, and no scanning, where the filter cannot work.
warned ()
{
  local what="$1" regex="$2"
  shift 2
  rm -f "$tmpdir/cache.log"
  t "$NBDKIT" -U - --filter=scan "$@" --run "$tmpdir/scan \"\$uri\" 'time.sleep(0.3)'" \
    > "$tmpdir/w.out" 2> "$tmpdir/w.err" || true
  grep -q "$regex" "$tmpdir/w.err" ||
    { cat "$tmpdir/w.err"; fail "$what: no warning /$regex/"; }
  ! grep -q offset= "$tmpdir/w.out" ||
    { cat "$tmpdir/w.out"; fail "$what: scanned anyway"; }
}
warned "serialising stack" \
  "scan: warning: underlying plugin does not support the PARALLEL thread model, not scanning" \
  --filter="$debian_filterdir/nbdkit-noparallel-filter.so" "${logargs[@]}"
warned "emulated cache" \
  "scan: warning: underlying plugin does not support NBD_CMD_CACHE, not scanning; try adding --filter=cache after this filter" \
  --filter="$log_so" --filter="$debian_filterdir/nbdkit-nocache-filter.so" \
  file "$disk" logfile="$tmpdir/cache.log" cachemode=emulate
cat > "$tmpdir/named" <<'SH'
#!/bin/sh
nbdsh -u "nbd+unix:///other?socket=$1" -c 'import time; time.sleep(0.3)'
SH
chmod +x "$tmpdir/named"
rm -f "$tmpdir/cache.log"
t "$NBDKIT" -U - --filter=scan "${logargs[@]}" \
  --run "$tmpdir/named \"\$unixsocket\"" 2> "$tmpdir/n.err" ||
  fail "connecting to another export failed"
grep -q "scan: warning: not the default export, not scanning" \
  "$tmpdir/n.err" || { cat "$tmpdir/n.err"; fail "no export warning"; }
! grep -q " Cache " "$tmpdir/cache.log" || fail "scanned another export"

# Bad parameters: one line naming the parameter, exit 1.
bad ()
{
  refuses "$1" --filter=scan null 1M "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
bad '^nbdkit: scan: error: scan-size: 1000 is not a power of 2' scan-size=1000
bad '^nbdkit: scan: error: scan-size: 256 is not a power of 2' scan-size=256
bad '^nbdkit: scan: error: scan-size: 64M is not a power of 2' scan-size=64M
bad '^nbdkit: scan: error: scan-size: could not parse' scan-size=lots
bad '^nbdkit: scan: error: scan-ahead: could not decipher' scan-ahead=maybe
bad '^nbdkit: scan: error: scan-clock: could not decipher' scan-clock=
bad '^nbdkit: scan: error: scan-forever: could not decipher' scan-forever=2
bad "^nbdkit: null: error: unknown parameter 'scan-speed'" scan-speed=1
finish
