#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=checkwrite turns writes into checks: copying an export onto
# itself (nbdcopy, qemu-img convert -n) succeeds, while writes, zeroes
# and trims that differ from the plugin's data fail with EIO (and a
# fast zero that could only be checked by reading fails with ENOTSUP),
# with block status and without.  The plugin's file is never changed.
# Debian's nbdkit gives the same answers on the same commands.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd qemu-img

disk="$tmpdir/disk.img"
make_pattern "$disk.orig" $((4 * 1024 * 1024))
cp --sparse=always "$disk.orig" "$disk"
sum="$(sha256sum < "$disk")"

# Self-copies through the filter: nothing differs, so no error.
t "$NBDKIT" -U - --filter=checkwrite file "$disk" \
  --run 'nbdcopy "$uri" "$uri"' || fail "nbdcopy onto itself failed"
t "$NBDKIT" -U - --filter=checkwrite file "$disk" \
  --run 'qemu-img convert -n -f raw -O raw "$uri" "$uri"' ||
  fail "qemu-img convert onto itself failed"
# Copying other content in must fail.
make_pattern "$tmpdir/other" $((4 * 1024 * 1024))
printf 'x' | dd of="$tmpdir/other" bs=1 seek=300000 conv=notrunc status=none
expect_fail t "$NBDKIT" -U - --filter=checkwrite file "$disk" \
  --run "nbdcopy '$tmpdir/other' \"\$uri\"" 2> "$tmpdir/copy.err" ||
  fail "nbdcopy of different data succeeded"
grep -q "data written does not match expected" "$tmpdir/copy.err" ||
  { cat "$tmpdir/copy.err"; fail "no mismatch error from the filter"; }

# Each kind of request, answered the same with block status (the file
# plugin has it) and without (the noextents filter hides it).
cat > "$tmpdir/ops.py" <<'PY'
import errno
def expect(name, want, fn):
    try:
        fn()
        got = 0
    except nbd.Error as e:
        got = e.errnum
    assert got == want, "%s: got %s, want %s" % (name, got, want)
data = h.pread(65536, 262144)
assert data[:8] == (262144).to_bytes(8, "big")
assert not h.is_read_only() and h.can_trim() and h.can_zero()
assert h.can_fua() and h.can_flush() and h.can_fast_zero()
expect("same bytes", 0, lambda: h.pwrite(data, 262144))
expect("same bytes, fua", 0, lambda: h.pwrite(data[:4096], 262144,
                                                nbd.CMD_FLAG_FUA))
bad = bytearray(data); bad[65535] ^= 1
expect("one bit off", errno.EIO, lambda: h.pwrite(bytes(bad), 262144))
expect("zero hole", 0, lambda: h.zero(131072, 65536))
expect("fast zero hole", 0 if EXTENTS else errno.ENOTSUP,
       lambda: h.zero(131072, 65536, nbd.CMD_FLAG_FAST_ZERO))
expect("zero data", errno.EIO, lambda: h.zero(4096, 262144 + 60000))
expect("zero across", errno.EIO, lambda: h.zero(262144, 131072))
expect("fast zero data", errno.ENOTSUP,
       lambda: h.zero(4096, 262144, nbd.CMD_FLAG_FAST_ZERO))
expect("trim hole", 0, lambda: h.trim(131072, 65536))
expect("trim data", errno.EIO, lambda: h.trim(512, 262144 + 512))
expect("zeroes into hole", 0, lambda: h.pwrite(bytes(4096), 100000))
expect("zero whole hole", 0, lambda: h.zero(196608, 65536))
expect("flush", 0, lambda: h.flush())
PY
for ext in 1 0; do
  filters=(--filter=checkwrite)
  [ "$ext" = 1 ] || filters+=(--filter="$debian_filterdir/nbdkit-noextents-filter.so")
  t "$NBDKIT" -U - "${filters[@]}" file "$disk" --run \
    "nbdsh -u \"\$uri\" -c 'EXTENTS = $ext' -c - < '$tmpdir/ops.py'" \
    2> "$tmpdir/ops.err" ||
    { cat "$tmpdir/ops.err"; fail "request checks (extents=$ext) failed"; }
done

# The client asked for a writable export; the plugin was opened
# read-only and its file never changed.
[ "$(sha256sum < "$disk")" = "$sum" ] || fail "the plugin's file changed"

# Unknown parameters go to the plugin, which refuses them.
refuses "unknown parameter 'checkwrite'" \
  --filter=checkwrite null 1M checkwrite=1 || fail "checkwrite=1 not refused"

# Same command, same answers as Debian's nbdkit.
state_files=("$disk")
compare_own checkwrite-read read --filter=checkwrite file "$disk"
compare_own checkwrite-write write --filter=checkwrite file "$disk"
expect_in checkwrite-write "$ours" '^pwrite error EIO$'
expect_in checkwrite-write "$ours" '^trim error EIO$'
expect_in checkwrite-write "$ours" "^state disk.img $(sha256sum < "$disk.orig")"
cat > "$tmpdir/selfcopy" <<'SH'
#!/bin/sh
nbdcopy "$1" "$1" && echo copied
qemu-img convert -n -f raw -O raw "$1" "$1" && echo converted
SH
chmod +x "$tmpdir/selfcopy"
compare_own checkwrite-selfcopy "$tmpdir/selfcopy" --filter=checkwrite \
  file "$disk"
expect_in checkwrite-selfcopy "$ours" '^converted$'
finish
