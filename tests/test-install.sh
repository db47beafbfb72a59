#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make install puts everything where DESIGN.md and nbdkit(1) say: the
# server, plugins under $libdir/nbdkit/plugins, filters under
# $libdir/nbdkit/filters, the public headers, man pages (every page of
# docs/), the systemd units and nbdkit.pc;
# and what it installed works: the installed server serves the
# installed memory plugin, and a plugin builds against the installed
# headers found through pkg-config.
source "$(dirname "$0")/functions.sh"
requires_cmd make nbdinfo pkg-config cc

install_to_destdir
root="$dest$prefix"
for f in "$root/sbin/nbdkit" \
         "$dest$libdir/nbdkit/plugins/nbdkit-memory-plugin.so" \
         "$dest$libdir/nbdkit/plugins/nbdkit-file-plugin.so" \
         "$dest$libdir/nbdkit/plugins/nbdkit-null-plugin.so" \
         "$dest$libdir/nbdkit/filters/nbdkit-offset-filter.so" \
         "$root/include/nbdkit-plugin.h" "$root/include/nbdkit-filter.h" \
         "$root/include/nbdkit-common.h" "$root/include/nbdkit-version.h" \
         "$root/include/nbdkit-probe.h" "$root/include/nbdkit-async.h" \
         "$dest$libdir/nbdkit/plugins/nbdkit-example-async-plugin.so" \
         "$root/share/man/man3/nbdkit-async.3" \
         "$dest$libdir/pkgconfig/nbdkit.pc" \
         "$root/share/man/man1/nbdkit.1" \
         "$root/share/man/man1/nbdkit-memory-plugin.1" \
         "$root/share/bash-completion/completions/nbdkit"; do
  [ -e "$f" ] || fail "make install did not install $f"
done

# The modules are there as .so files only: no libtool archives (.la)
# left beside them.
la=$(find "$dest$libdir/nbdkit" -name '*.la' | head -5)
[ -z "$la" ] || fail "make install left libtool archives: $la"
[ "$(find "$dest$libdir/nbdkit/plugins" -name '*.so' | wc -l)" -ge 30 ] ||
  fail "too few plugins installed"

# All 41 filters of nbdkit 1.32, each with its man page.
filters="blocksize blocksize-policy cache cacheextents checkwrite cow ddrescue
  delay error exitlast exitwhen exportname ext2 extentlist fua gzip ip limit
  log luks multi-conn nocache noextents nofilter noparallel nozero offset
  partition pause protect rate readahead retry retry-request scan stats swab
  tar tls-fallback truncate xz"
[ "$(echo $filters | wc -w)" -eq 41 ] || fail "the list above is not 41 filters"
# Filters of nbdkit 1.34 to 1.46.
filters+=" readonly rotational openonce count evil spinning time-limit"
filters+=" map qcow2dec"
for f in $filters; do
  [ -e "$dest$libdir/nbdkit/filters/nbdkit-$f-filter.so" ] ||
    fail "make install did not install the $f filter"
  [ -s "$root/share/man/man1/nbdkit-$f-filter.1" ] ||
    fail "make install did not install nbdkit-$f-filter.1"
done

# Every server-wide page of docs/Makefile.am, as a man page in section 1.
pages=$(sed -n '/^man_pod *=/,/[^\\]$/p' "$abs_top_srcdir/docs/Makefile.am" |
        tr ' \t\\' '\n\n\n' | sed -n 's/\.pod$//p')
[ "$(echo "$pages" | wc -l)" -ge 11 ] || fail "too few pages in man_pod: $pages"
for p in $pages; do
  [ -s "$root/share/man/man1/$p.1" ] ||
    fail "make install did not install the man page $p.1"
done
# The APIs and the language plugins in section 3, as upstream files
# them: `man 3 nbdkit-plugin' finds the plugin API.
for p in nbdkit-plugin nbdkit-filter nbdkit-async nbdkit-python-plugin \
         nbdkit-perl-plugin nbdkit-ruby-plugin nbdkit-lua-plugin \
         nbdkit-tcl-plugin nbdkit-sh-plugin nbdkit-cc-plugin \
         nbdkit-ocaml-plugin nbdkit-golang-plugin nbdkit-rust-plugin; do
  [ -s "$root/share/man/man3/$p.3" ] ||
    fail "make install did not install the man page $p.3"
  [ ! -e "$root/share/man/man1/$p.1" ] || fail "$p is in section 1 too"
done
if command -v man > /dev/null; then
  MANPATH="$root/share/man" man -w 3 nbdkit-plugin | grep -q 'man3/nbdkit-plugin.3' ||
    fail "man 3 nbdkit-plugin does not find the page"
  MANPATH="$root/share/man" man 3 nbdkit-filter 2>/dev/null |
    grep -q 'nbdkit-filter' || fail "man 3 nbdkit-filter shows nothing"
fi
# The systemd units, unless configured --with-systemdsystemunitdir=no.
unitdir=$(sed -n 's/^systemdsystemunitdir = //p' \
            "$abs_top_builddir/service/Makefile")
unitdir=${unitdir/\$\{prefix\}/$prefix}
if [ -n "$unitdir" ]; then
  for u in nbdkit.socket nbdkit.service; do
    [ -s "$dest$unitdir/$u" ] || fail "make install did not install $unitdir/$u"
  done
fi

# The installed server with the installed plugin (by path: the compiled-in
# plugin directory is not under DESTDIR).
out=$(t "$root/sbin/nbdkit" -U - \
        "$dest$libdir/nbdkit/plugins/nbdkit-memory-plugin.so" 1M \
        --run 'nbdinfo --size "$uri"')
[ "$out" = 1048576 ] || fail "installed server served size '$out'"

# A plugin author's build: cflags from the installed nbdkit.pc.
cat > "$tmpdir/tiny.c" <<'C'
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#include <string.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *tiny_open (int ro) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t tiny_get_size (void *h) { return 512; }
static int tiny_pread (void *h, void *b, uint32_t n, uint64_t o, uint32_t f)
{ memset (b, 't', n); return 0; }
static struct nbdkit_plugin plugin = {
  .name = "tiny", .open = tiny_open, .get_size = tiny_get_size,
  .pread = tiny_pread,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C
cflags=$(PKG_CONFIG_SYSROOT_DIR="$dest" \
         PKG_CONFIG_PATH="$dest$libdir/pkgconfig" pkg-config --cflags nbdkit)
cc -Wall -Werror -fPIC -shared $cflags "$tmpdir/tiny.c" -o "$tmpdir/tiny.so" ||
  fail "a plugin did not build against the installed headers ($cflags)"
t "$root/sbin/nbdkit" -U - "$tmpdir/tiny.so" \
  --run 'nbdsh -u "$uri" -c "assert h.pread(4, 0) == b\"tttt\""'
