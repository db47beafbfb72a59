#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example plugin and the example filter are templates that build
# out of tree from the installed headers alone, found through the
# installed nbdkit.pc: make install into a private directory, copy the
# two example.c files away from the source tree, build each with only
# `gcc -fPIC -shared $(pkg-config --cflags nbdkit)' (and -Wall -Werror),
# check their probes are in the .so files (readelf), load both into the
# built server, write and read back data through them.  The same
# sources built with -DNBDKIT_PROBE_PROVIDER=myplugin carry their
# probes under that provider.  It would catch: the examples needing
# config.h, PACKAGE_VERSION or a header of the source tree; a public
# header missing from make install or from nbdkit.pc's Cflags; a
# wrong plugindir or filterdir in nbdkit.pc; NBDKIT_PROBE_PROVIDER
# ignored.  (Debian's nbdkit headers in /usr/include lack
# nbdkit_connection_id and nbdkit-probe.h, so picking them up instead
# of ours fails the build.)
source "$(dirname "$0")/functions.sh"
requires_cmd make pkg-config gcc readelf nbdsh
# The probes in the .so files need <sys/sdt.h> where they are built.
requires grep -Eq '^#define (HAVE_SYS_SDT_H|ENABLE_PROBES) 1' \
  "$abs_top_builddir/config.h"

install_to_destdir

# Only the installed .pc: not the build tree's, not the system's.
unset PKG_CONFIG_PATH
export PKG_CONFIG_LIBDIR="$dest$libdir/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$dest"
[ -f "$PKG_CONFIG_LIBDIR/nbdkit.pc" ] || fail "nbdkit.pc was not installed"
cflags="$(pkg-config --cflags nbdkit)" || fail "pkg-config --cflags nbdkit"
cflags="${cflags% }"
echo "pkg-config --cflags nbdkit: $cflags"
[ "$cflags" = "-I$dest$prefix/include" ] ||
  fail "Cflags are '$cflags', expected the installed include directory"
for h in nbdkit-plugin.h nbdkit-filter.h nbdkit-common.h nbdkit-probe.h \
         nbdkit-version.h; do
  [ -f "$dest$prefix/include/$h" ] || fail "$h was not installed"
done
# The directories the server searches, where make install put the
# examples.  pkgconf adds the sysroot to these too; pkg-config does not.
pdir="$(pkg-config --variable=plugindir nbdkit)"
fdir="$(pkg-config --variable=filterdir nbdkit)"
pdir="${pdir#"$dest"}" fdir="${fdir#"$dest"}"
[ "$pdir" = "$libdir/nbdkit/plugins" ] || fail "plugindir is $pdir"
[ "$fdir" = "$libdir/nbdkit/filters" ] || fail "filterdir is $fdir"
[ -f "$dest$pdir/nbdkit-example-plugin.so" ] ||
  fail "plugindir=$pdir: no nbdkit-example-plugin.so installed there"
[ -f "$dest$fdir/nbdkit-example-filter.so" ] ||
  fail "filterdir=$fdir: no nbdkit-example-filter.so installed there"

# Away from the source tree: nothing can come from "" includes there.
src="$tmpdir/src"
mkdir -p "$src/plugin" "$src/filter" "$src/own"
cp "$abs_top_srcdir/plugins/example/example.c" "$src/plugin/"
cp "$abs_top_srcdir/filters/example/example.c" "$src/filter/"
cp "$abs_top_srcdir/plugins/example/example.c" "$src/own/"

build ()
{
  local dir="$1" out="$2"
  shift 2
  (cd "$dir" &&
   gcc -Wall -Werror -fPIC -shared $(pkg-config --cflags nbdkit) "$@" \
       example.c -o "$out") > "$dir/build.log" 2>&1 ||
    { cat "$dir/build.log"; fail "$dir/example.c did not build: gcc $*"; }
}
build "$src/plugin" nbdkit-example-plugin.so
build "$src/filter" nbdkit-example-filter.so
build "$src/own" nbdkit-example-plugin.so -DNBDKIT_PROBE_PROVIDER=myplugin

# readelf: PROVIDER:NAME pairs of each .so.
notes ()
{
  readelf -n "$1" | awk '/Provider:/ { p = $2 } /Name:/ { print p ":" $2 }' |
    sort
}
notes "$src/plugin/nbdkit-example-plugin.so" > "$tmpdir/plugin.notes"
notes "$src/filter/nbdkit-example-filter.so" > "$tmpdir/filter.notes"
notes "$src/own/nbdkit-example-plugin.so" > "$tmpdir/own.notes"
cat "$tmpdir/plugin.notes" "$tmpdir/filter.notes" "$tmpdir/own.notes"
for p in config read write zero flush; do
  grep -qx "nbdkit:example_$p" "$tmpdir/plugin.notes" ||
    fail "the plugin built out of tree has no probe nbdkit:example_$p"
  grep -qx "myplugin:example_$p" "$tmpdir/own.notes" ||
    fail "built with NBDKIT_PROBE_PROVIDER=myplugin: no myplugin:example_$p"
done
! grep -q '^nbdkit:' "$tmpdir/own.notes" ||
  fail "built with NBDKIT_PROBE_PROVIDER=myplugin, probes remain under nbdkit"
for p in open read_done write_done; do
  grep -qx "nbdkit:example_filter_$p" "$tmpdir/filter.notes" ||
    fail "the filter built out of tree has no probe nbdkit:example_filter_$p"
done

# Loaded by path into the built server: the data goes through both.
for plugin in "$src/plugin" "$src/own"; do
  t "$NBDKIT" -U - --filter="$src/filter/nbdkit-example-filter.so" \
    "$plugin/nbdkit-example-plugin.so" 1M --run 'nbdsh -u "$uri" -c "
assert h.get_size() == 1048576
h.pwrite(b\"hello out of tree\" * 100, 8192)
assert h.pread(1700, 8192) == b\"hello out of tree\" * 100
assert h.pread(512, 0) == bytes(512)
"' || fail "the examples built out of tree ($plugin) did not serve data"
done
echo "OK: the examples build from the installed nbdkit.pc and serve data"
