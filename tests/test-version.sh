#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --version (and -V) prints what nbdkit prints, for the release whose
# interfaces this server implements, 1.46.2: "nbdkit 1.46.2" alone (scripts read $(nbdkit --version) as one
# value), then with a plugin one line per layer, outermost first
# (NAME VERSION, or NAME alone for a plugin without a version).
# Filters given without a plugin add nothing.  This server's own name
# is in --dump-config and --help, not here.  nbdkit.pc and
# nbdkit-version.h say the same release.
source "$(dirname "$0")/functions.sh"

for opt in --version -V; do
  t "$NBDKIT" $opt > "$tmpdir/v"
  cat "$tmpdir/v"
  [ "$(cat "$tmpdir/v")" = "nbdkit 1.46.2" ] ||
    fail "$opt: does not print exactly one line 'nbdkit 1.46.2'"
done
# The one value a configure script reads.
set -- $(t "$NBDKIT" --version)
[ $# -eq 2 ] && [ "$1" = nbdkit ] && [ "$2" = 1.46.2 ] ||
  fail "\$(nbdkit --version) is not two words"

# The same lines as Debian's nbdkit (1.32.5), layers outermost first,
# but for the release each names.
check ()
{
  local want
  want="$*"
  t "$NBDKIT" "$@" > "$tmpdir/ours" 2>&1 || fail "$want: failed"
  if [ -x /usr/bin/nbdkit ]; then
    /usr/bin/nbdkit "$@" > "$tmpdir/debian" 2>&1 ||
      fail "$want: Debian's nbdkit failed"
    sed 's/ 1\.32\.5$/ 1.46.2/' "$tmpdir/debian" > "$tmpdir/debian.146"
    diff -u "$tmpdir/debian.146" "$tmpdir/ours" ||
      fail "$want: differs from Debian's nbdkit"
  fi
}
check --filter=offset memory --version
check --filter=delay --filter=cow null --version
check --filter=delay --version
check -V sh
check file --version
printf 'nbdkit 1.46.2\noffset 1.46.2\nmemory 1.46.2\n' > "$tmpdir/want"
t "$NBDKIT" --filter=offset memory --version | diff -u "$tmpdir/want" - ||
  fail "layer lines differ"

# A plugin that declares no version: its name alone.
if command -v cc >/dev/null; then
  cat > "$tmpdir/nover.c" <<'C'
#include <stdint.h>
#include <string.h>
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *o (int ro) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 512; }
static int r (void *h, void *b, uint32_t n, uint64_t off, uint32_t f)
{ memset (b, 0, n); return 0; }
static struct nbdkit_plugin plugin = {
  .name = "nover", .open = o, .get_size = s, .pread = r,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C
  cc -shared -fPIC -I"$abs_top_srcdir/include" -I"$abs_top_builddir/include" \
    -o "$tmpdir/nover.so" "$tmpdir/nover.c"
  t "$NBDKIT" "$tmpdir/nover.so" --version > "$tmpdir/nover"
  cat "$tmpdir/nover"
  [ "$(sed -n 2p "$tmpdir/nover")" = "nover" ] ||
    fail "a plugin without a version is not printed as its name alone"
fi

# The same release in the build's nbdkit.pc (pkg-config --modversion,
# which configure scripts of out-of-tree plugins gate on) and in the
# nbdkit-version.h macros a plugin compiles against.
if command -v pkg-config >/dev/null; then
  v="$(PKG_CONFIG_PATH="$abs_top_builddir" PKG_CONFIG_LIBDIR=/nonexistent \
       pkg-config --modversion nbdkit)"
  [ "$v" = "1.46.2" ] || fail "nbdkit.pc says version '$v', not 1.46.2"
fi
if command -v cc >/dev/null; then
  cat > "$tmpdir/ver.c" <<'C'
#include <nbdkit-plugin.h>
_Static_assert (NBDKIT_VERSION_MAJOR == 1 && NBDKIT_VERSION_MINOR == 46 &&
                NBDKIT_VERSION_MICRO == 2, "nbdkit-version.h: not 1.46.2");
const char *v = NBDKIT_VERSION_STRING;
C
  cc -c -I"$abs_top_srcdir/include" -I"$abs_top_builddir/include" \
    -o "$tmpdir/ver.o" "$tmpdir/ver.c" ||
    fail "nbdkit-version.h does not say 1.46.2"
fi
