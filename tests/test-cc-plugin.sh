#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cc plugin against Debian's: the same C source (an in-memory disk,
# plugins/cc/test-cc-disk.c) compiled at start-up by our nbdkit and by
# Debian's, with parameters passed on to it, gives the same size, flags,
# map, bytes copied and bytes written.  Then: the source read from
# stdin (cc -), CC=, CFLAGS= (replacing the flags) and EXTRA_CFLAGS=
# (adding to them) reach the compiler, the self-contained script form
# (#if 0 / exec nbdkit cc "$0"), and the compiled plugin's own
# parameter errors.
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd cc gcc

src="$abs_top_srcdir/plugins/cc/test-cc-disk.c"
[ -f "$src" ] || fail "$src missing"

compare "cc read" read cc "$src" size=3M fill=7
compare "cc write" write cc "$src" size=2M
compare "cc flags" read cc "$src" CC=gcc EXTRA_CFLAGS=-DDISK_BLOCK=4096 \
  size=1M
expect_in "cc flags map" "$ours" '^ +0 +1048576 +3 +hole,zero$'
finish

# cc -: the source on stdin.
out="$(t "$NBDKIT" -U - cc - size=5M --run 'nbdinfo --size "$uri"' < "$src")"
[ "$out" = 5242880 ] || fail "cc -: size $out"

# EXTRA_CFLAGS adds to the default flags: a block size of 512 makes a
# map of 512-byte extents once a byte is written in the second block.
cat > "$tmpdir/map.py" <<'PY'
h.pwrite(b"x", 512)
entries = []
h.block_status(4096, 0, lambda ctx, off, e, err: entries.extend(e))
print(entries)
PY
out="$(t "$NBDKIT" -U - cc "$src" EXTRA_CFLAGS=-DDISK_BLOCK=512 \
  --run "nbdsh --base-allocation -u \"\$uri\" -c - < $tmpdir/map.py")"
[ "$out" = "[512, 3, 512, 0, 3072, 3]" ] || fail "EXTRA_CFLAGS: map $out"

# CFLAGS replaces the flags: without -shared there is no plugin.
status=0
t "$NBDKIT" -U - cc "$src" CFLAGS="-O2 -fPIC" --run true \
  > "$tmpdir/res" 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "CFLAGS without -shared: status $status"
grep -q "undefined reference to .main" "$tmpdir/res" ||
  fail "CFLAGS= did not replace the flags: $(cat "$tmpdir/res")"
out="$(t "$NBDKIT" -U - cc "$src" CFLAGS="-O0 -fPIC -shared" size=7k \
  --run 'nbdinfo --size "$uri"')"
[ "$out" = 7168 ] || fail "CFLAGS=-O0 -fPIC -shared: size $out"

# CC= picks the compiler (here a wrapper that leaves a mark).
cat > "$tmpdir/mycc" <<'SH'
#!/bin/sh
touch "$(dirname "$0")/mycc-ran"
exec gcc "$@"
SH
chmod +x "$tmpdir/mycc"
out="$(t "$NBDKIT" -U - cc "$src" CC="$tmpdir/mycc" size=9k \
  --run 'nbdinfo --size "$uri"')"
[ "$out" = 9216 ] && [ -f "$tmpdir/mycc-ran" ] || fail "CC= not used"

# The self-contained script: #if 0 / exec nbdkit cc "$0" "$@".
cp "$src" "$tmpdir/script.c"
chmod +x "$tmpdir/script.c"
mkdir "$tmpdir/bin"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$NBDKIT" > "$tmpdir/bin/nbdkit"
chmod +x "$tmpdir/bin/nbdkit"
out="$(PATH="$tmpdir/bin:$PATH" t "$tmpdir/script.c" -U - size=11k \
  --run 'nbdinfo --size "$uri"')"
[ "$out" = 11264 ] || fail "self-contained script: size $out"

# The compiled plugin's own errors: its message, exit 1.
status=0
t "$NBDKIT" cc "$src" colour=red > "$tmpdir/res" 2>&1 || status=$?
cat "$tmpdir/res"
[ "$status" -eq 1 ] || fail "colour=red: status $status"
grep -q "unknown parameter 'colour'" "$tmpdir/res" || fail "colour=red"
