# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/perl-lua-compare.sh: sourced (after functions.sh) by
# lang/host-test.sh for the perl and lua tests that run one script under
# Debian's nbdkit 1.32 (the reference host) and under ours: "same
# script, same bytes".
#
#   same_script LABEL ARGS...   run "nbdkit -U - ARGS --run CLIENT" under
#                               both servers; CLIENT prints the export's
#                               size and flags, writes of every kind the
#                               export allows (each one's outcome and
#                               errno), the map and the sha256 of the
#                               export read back.  Fails the test on any
#                               difference, showing both outputs.
#   $ref_nbdkit                 Debian's nbdkit
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"
requires_cmd nbdinfo nbdsh sha256sum

# Block size constraints are left out: our server advertises them for
# every export, Debian's 1.32 only when the plugin asks.
cat > "$tmpdir/compare-client.py" <<'PY'
import hashlib
size = h.get_size()
print("size", size, "ro", h.is_read_only(), "flush", h.can_flush(),
      "fua", h.can_fua(), "trim", h.can_trim(), "zero", h.can_zero(),
      "fast_zero", h.can_fast_zero(), "rotational", h.is_rotational(),
      "cache", h.can_cache(), "multi_conn", h.can_multi_conn(),
      "df", h.can_df())
def op(name, fn):
    try:
        r = fn()
        print(name, "ok", hashlib.sha256(r).hexdigest() if r else "")
    except nbd.Error as e:
        print(name, "error", e.errno)
block = bytes(i % 251 for i in range(65536))
op("pread-first", lambda: h.pread(4096, 0))
op("pread-last", lambda: h.pread(512, size - 512))
if not h.is_read_only():
    op("pwrite", lambda: h.pwrite(block, 0))
    op("pwrite-unaligned", lambda: h.pwrite(b"same bytes", size // 2 + 3))
    if h.can_fua():
        op("pwrite-fua", lambda: h.pwrite(block[:4096], 8192,
                                          nbd.CMD_FLAG_FUA))
    if h.can_zero():
        op("zero", lambda: h.zero(16384, 4096))
        op("zero-unaligned", lambda: h.zero(1000, 100))
        if h.can_fast_zero():
            op("zero-fast", lambda: h.zero(4096, 32768,
                                           nbd.CMD_FLAG_FAST_ZERO))
    if h.can_trim():
        op("trim", lambda: h.trim(8192, 40960))
    if h.can_flush():
        op("flush", lambda: h.flush())
data = bytearray()
for off in range(0, size, 1 << 20):
    data += h.pread(min(1 << 20, size - off), off)
print("pread sha256", hashlib.sha256(data).hexdigest())
PY

# _same_script_run SERVER OUT ARGS...
_same_script_run ()
{
  local server="$1" out="$2" status=0
  shift 2
  t "$server" -U - "$@" --run "nbdsh -u \"\$uri\" -c - < $tmpdir/compare-client.py &&
    nbdinfo --map \"\$uri\"" > "$out" 2> "$out.err" || status=$?
  echo "exit status $status" >> "$out"
}

same_script ()
{
  local label="$1"
  shift
  _same_script_run "$NBDKIT" "$tmpdir/$label.ours" "$@"
  _same_script_run "$ref_nbdkit" "$tmpdir/$label.ref" "$@"
  if ! grep -qx 'exit status 0' "$tmpdir/$label.ref"; then
    cat "$tmpdir/$label.ref" "$tmpdir/$label.ref.err"
    fail "$label: Debian's nbdkit failed on this script"
  fi
  if ! diff -u "$tmpdir/$label.ref" "$tmpdir/$label.ours"; then
    cat "$tmpdir/$label.ours.err"
    fail "$label: our server and Debian's differ (- Debian's, + ours)"
  fi
  echo "$label: same script, same bytes:"
  cat "$tmpdir/$label.ours"
}
