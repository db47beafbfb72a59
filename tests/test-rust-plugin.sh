#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The Rust binding (plugins/rust): its example RAM disk, built with
# Debian's cargo offline, is an ordinary plugin .so that our server and
# Debian's nbdkit 1.32 both load: the same writes give the same bytes,
# the same size, flags and map through both (nbdkit 1.32 lacks our
# nbdkit_probe, which the binding looks up at run time, so the .so must
# load there too).  The failing example shows errors crossing the
# boundary: an Err's errno reaches the client (EIO by default, ENOSPC
# for writes, err=28 turns reads into ENOSPC), a panic is caught and
# becomes EIO with one log line naming the callback, the server keeps
# serving after both, and an unknown parameter fails at start-up with
# the plugin's message.  It would catch a plugin structure whose layout
# differs from the C one (wrong callback called, or a crash), errno
# lost at the boundary, or a panic unwinding into the server.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy
[ -x /usr/bin/cargo ] || { echo "$0: SKIP: /usr/bin/cargo (Debian's cargo) is not installed"; exit 77; }
[ -x /usr/bin/nbdkit ] || { echo "$0: SKIP: Debian's nbdkit is not installed"; exit 77; }

cp -r "$abs_top_srcdir/plugins/rust" "$tmpdir/crate"
rm -rf "$tmpdir/crate/target"
( cd "$tmpdir/crate" &&
  CARGO_HOME="$tmpdir/cargo-home" CARGO_TARGET_DIR="$tmpdir/target" \
  timeout 300 /usr/bin/cargo build --offline --release --examples -q ) \
  > "$tmpdir/build.log" 2>&1 || { cat "$tmpdir/build.log"; fail "cargo build failed"; }
ram="$tmpdir/target/release/examples/libramdisk.so"
bad="$tmpdir/target/release/examples/libfailing.so"
[ -f "$ram" ] && [ -f "$bad" ] || fail "the examples were not built"

# The same session through each server: writes, a zero, a trim, then
# the bytes (as a checksum), size, flags and the map.
cat > "$tmpdir/session.py" <<'PY'
import hashlib
h.pwrite(b"rust" * 4096, 70000)
h.pwrite(b"\x01" * 65536, 3 << 20)
h.zero(65536 * 2, 65536 * 4)
h.trim(65536, 3 << 20)
h.flush()
data = h.pread(4 << 20, 0)
print("md5", hashlib.md5(data).hexdigest())
print("size", h.get_size(), "ro", h.is_read_only(), "multi", h.can_multi_conn(),
      "zero", h.can_zero(), "trim", h.can_trim(), "flush", h.can_flush())
PY
for srv in ours debian; do
  bin="$NBDKIT"
  [ $srv = debian ] && bin=/usr/bin/nbdkit
  t timeout 60 "$bin" -U - "$ram" 4M \
    --run "nbdsh -u \"\$uri\" -c 'exec(open(\"$tmpdir/session.py\").read())' &&
           nbdinfo --map \"\$uri\"" > "$tmpdir/$srv.out" ||
    fail "the RAM disk failed under $srv"
  cat "$tmpdir/$srv.out"
done
cmp "$tmpdir/ours.out" "$tmpdir/debian.out" ||
  fail "ours and Debian's nbdkit differ on the same Rust plugin"
grep -q '^size 4194304 ro False multi True zero True trim True flush True$' "$tmpdir/ours.out" ||
  fail "wrong size or flags"
# The written block is data; the block written at 3 MiB was trimmed,
# so it is a hole again like everything never written.
grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +' "$tmpdir/ours.out" | awk '{ print $1, $2, $4 }' > "$tmpdir/map"
printf '%s\n' "0 65536 hole,zero" "65536 65536 data" "131072 4063232 hole,zero" > "$tmpdir/map.want"
cmp "$tmpdir/map" "$tmpdir/map.want" || { cat "$tmpdir/map"; fail "wrong map"; }

# Errors across the boundary.
cat > "$tmpdir/fail.py" <<'PY'
import errno
def code(e):    # libnbd gives the errno's name
    return e.errno if isinstance(e.errno, int) else getattr(errno, e.errno)
assert h.pread(4, 0) == b"\xab" * 4
for off, want in ((1 << 20, ERR), (2 << 20, errno.EIO)):
    try:
        h.pread(4, off)
        raise SystemExit("read at %d did not fail" % off)
    except nbd.Error as e:
        assert code(e) == want, (off, e.errno, want)
try:
    h.pwrite(b"x", 0)
    raise SystemExit("write did not fail")
except nbd.Error as e:
    assert code(e) == errno.ENOSPC, e.errno
assert h.pread(4, 0) == b"\xab" * 4     # still serving
print("errors ok")
PY
sed 's/ERR/errno.EIO/' "$tmpdir/fail.py" > "$tmpdir/fail-eio.py"
sed 's/ERR/errno.ENOSPC/' "$tmpdir/fail.py" > "$tmpdir/fail-enospc.py"
t timeout 60 "$NBDKIT" -U - "$bad" \
  --run "nbdsh -u \"\$uri\" -c 'exec(open(\"$tmpdir/fail-eio.py\").read())'" \
  > "$tmpdir/fail.out" 2> "$tmpdir/fail.err" ||
  { cat "$tmpdir/fail.out" "$tmpdir/fail.err"; fail "the failing plugin did not fail as expected"; }
cat "$tmpdir/fail.err"
grep -q 'error: pread: read at 1048576 fails on purpose$' "$tmpdir/fail.err" ||
  fail "no log line for the failing read"
[ "$(grep -c 'pread: panicked: read at 2097152 panics on purpose$' "$tmpdir/fail.err")" -eq 1 ] ||
  fail "the panic was not logged exactly once"
! grep -q "thread '.*' panicked" "$tmpdir/fail.err" ||
  fail "Rust's default panic message reached stderr"
t timeout 60 "$NBDKIT" -U - "$bad" err=28 \
  --run "nbdsh -u \"\$uri\" -c 'exec(open(\"$tmpdir/fail-enospc.py\").read())'" \
  > /dev/null 2>&1 || fail "err=28 did not turn the read error into ENOSPC"

# A bad parameter: one line with the plugin's message, exit 1.
status=0
timeout 30 "$NBDKIT" -U - "$bad" colour=blue --run true > /dev/null \
  2> "$tmpdir/cfg.err" || status=$?
cat "$tmpdir/cfg.err"
[ "$status" -eq 1 ] || fail "an unknown parameter: exit $status, not 1"
grep -q 'config: unknown parameter "colour"' "$tmpdir/cfg.err" ||
  fail "no message naming the unknown parameter"
echo "OK"
