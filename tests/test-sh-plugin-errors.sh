#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh plugin's exit-code protocol on its error paths: a script that
# exits 1 with "ENOSPC msg" or "EIO msg" gives the client that errno and
# the log that message; garbage exit codes, reserved codes (9-15), a
# signal, too little or too much data are EIO; a missing zero method or
# one that says ENOTSUP falls back to writes; a missing get_size fails
# the connection; bad parameters are one line naming them, exit 1.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

script="$tmpdir/err.sh"
cat > "$script" <<'SH'
#!/bin/sh
# The offset of a read chooses how it fails.
case "$1" in
  get_size) echo 1M ;;
  can_write|can_zero) exit 0 ;;
  pread)
    case "$4" in
      0) head -c $3 /dev/zero ;;
      512) echo 'ENOSPC no room in here' >&2; exit 1 ;;
      1024) echo 'EIO the disk is on fire' >&2; exit 1 ;;
      1536) echo 'complete garbage' >&2; exit 42 ;;
      2048) exit 9 ;;
      2560) kill -9 $$ ;;
      3072) head -c 10 /dev/zero ;;
      3584) head -c $(( $3 * 3 )) /dev/zero ;;
      4096) echo '  EROFS' >&2; exit 200 ;;
      4608) echo 'erofs read-only' >&2; exit 1 ;;
      *) cat "$tmpdir/data" 2>/dev/null || head -c $3 /dev/zero ;;
    esac ;;
  pwrite) cat > "$tmpdir/data" ;;
  zero) echo 'ENOTSUP use writes' >&2; exit 1 ;;
  *) exit 2 ;;
esac
SH
chmod +x "$script"

py='
import errno
def err(off):
    try:
        h.pread(512, off)
    except nbd.Error as e:
        return e.errno
    return 0
assert err(0) == 0
assert err(512) == "ENOSPC", err(512)
assert err(1024) == "EIO"
assert err(1536) == "EIO"
assert err(2048) == "EIO"
assert err(2560) == "EIO"
assert err(3072) == "EIO"
assert err(3584) == "EIO"
# After blanks the name is not parsed, as with nbdkit: EIO.
assert err(4096) == "EIO", err(4096)
assert err(4608) == "EPERM", err(4608)  # EROFS goes over NBD as EPERM
# zero says ENOTSUP: the server writes zeroes with pwrite instead.
h.pwrite(b"x" * 512, 8192)
h.zero(512, 8192)
assert h.pread(512, 8192) == bytes(512)
print("ok")
'
t "$NBDKIT" -U - sh "$script" --run "nbdsh -u \"\$uri\" -c '$py'" \
  > "$tmpdir/out" 2> "$tmpdir/err" || {
  cat "$tmpdir/out" "$tmpdir/err"
  fail "error paths: the client saw wrong errors"
}
cat "$tmpdir/err"
grep -q 'pread: no room in here$' "$tmpdir/err" || fail "no ENOSPC message"
grep -q 'pread: the disk is on fire$' "$tmpdir/err" || fail "no EIO message"
grep -q 'pread: complete garbage$' "$tmpdir/err" || fail "no garbage message"
grep -q 'signal 9' "$tmpdir/err" || fail "no signal message"
grep -q 'printed 10 bytes, expected 512' "$tmpdir/err" || fail "no short read"

# A script without get_size: the client cannot connect.
cat > "$tmpdir/nosize.sh" <<'SH'
#!/bin/sh
exit 2
SH
chmod +x "$tmpdir/nosize.sh"
expect_fail t "$NBDKIT" -U - sh "$tmpdir/nosize.sh" --run 'nbdinfo "$uri"' \
  2> "$tmpdir/err"
grep -q 'get_size.*required' "$tmpdir/err" || fail "no get_size message"

# Bad parameters: one line naming the parameter, exit status 1.
bad ()
{
  local want="$1" status=0
  shift
  t "$NBDKIT" "$@" > "$tmpdir/out" 2>&1 || status=$?
  [ "$status" -eq 1 ] || fail "$*: exit status $status, not 1"
  [ "$(wc -l < "$tmpdir/out")" -eq 1 ] ||
    fail "$*: not one line: $(cat "$tmpdir/out")"
  grep -q -- "$want" "$tmpdir/out" ||
    fail "$*: no '$want' in: $(cat "$tmpdir/out")"
  cat "$tmpdir/out"
}
bad "unknown parameter 'foo'" sh "$script" foo=bar
bad "script" sh "$script" extra
bad "$tmpdir/missing.sh" sh "$tmpdir/missing.sh"
touch "$tmpdir/noexec.sh"
bad "not executable" sh "$tmpdir/noexec.sh"
bad "script=" sh foo=bar
# A config method that fails: its message, exit 1.
cat > "$tmpdir/cfg.sh" <<'SH'
#!/bin/sh
case "$1" in
  config) echo "EINVAL $2: bad value '$3'" >&2; exit 1 ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/cfg.sh"
bad "size: bad value 'x'" sh "$tmpdir/cfg.sh" size=x
