#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make install puts the tracing libraries where the tracers look without
# -I or -L: the SystemTap tapset (nbdkit.stp, nbdkit_conninfo.stp) in
# the configured tapsetdir, which is stap's own tapset directory when
# configure found stap (the folder holding stap's errno.stp); the D
# library nbdkit_translators.d in the configured dtracelibdir; probes.d
# beside the scripts.  The installed tapset names the installed server
# and, where stap runs, elaborates its hierarchical aliases.  It would
# catch the tapset going back to DATADIR/systemtap/tapset (where a
# /usr/local stap does not look), a library left out of make install,
# or a tapset that names the build tree's binary.  The installed
# nbdkit-top and nbdkit-trace find their shared module, nbdkit_metrics.py.
source "$(dirname "$0")/functions.sh"
requires_cmd make

install_to_destdir
mk="$abs_top_builddir/tools/Makefile"
expand () {
  local d="$1"
  d=${d//\$\{datadir\}/$prefix/share}
  d=${d//\$\{libdir\}/$libdir}
  d=${d//\$\{prefix\}/$prefix}
  echo "$d"
}
tapsetdir=$(expand "$(sed -n 's/^tapsetdir = //p' "$mk")")
dtracelibdir=$(expand "$(sed -n 's/^dtracelibdir = //p' "$mk")")
echo "$0: tapsetdir=$tapsetdir dtracelibdir=$dtracelibdir"

# nbdkit-top and nbdkit-trace find nbdkit_metrics.py, the metrics
# endpoint's reader, where it is installed (beside the scripts).
/usr/bin/python3 "$dest$prefix/bin/nbdkit-top" --version ||
  fail "the installed nbdkit-top does not start"
"$dest$prefix/bin/nbdkit-trace" --metrics "unix:$tmpdir/none" latency 1 \
  2> "$tmpdir/m.err" && fail "latency from a missing endpoint worked"
grep -q "cannot read the metrics endpoint unix:$tmpdir/none" \
  "$tmpdir/m.err" || { cat "$tmpdir/m.err"; fail "the installed nbdkit-trace did not read the endpoint"; }

if [ -n "$tapsetdir" ]; then
  for f in nbdkit.stp nbdkit_conninfo.stp; do
    [ -s "$dest$tapsetdir/$f" ] || fail "make install did not install $tapsetdir/$f"
  done
  grep -q "process(\"$prefix/sbin/nbdkit\")" "$dest$tapsetdir/nbdkit.stp" ||
    fail "nbdkit.stp does not name the installed server $prefix/sbin/nbdkit"
  # The plugins' and filters' probes: on the installed .so files.
  grep -q "process(\"$libdir/nbdkit/plugins/nbdkit-curl-plugin.so\")" \
    "$dest$tapsetdir/nbdkit.stp" ||
    fail "nbdkit.stp does not name the installed curl plugin"
  grep -q "process(\"$libdir/nbdkit/filters/nbdkit-cache-filter.so\")" \
    "$dest$tapsetdir/nbdkit.stp" ||
    fail "nbdkit.stp does not name the installed cache filter"
  if stap=$(command -v stap); then
    own="$(dirname "$(dirname "$stap")")/share/systemtap/tapset"
    if [ -e "$own/errno.stp" ]; then
      [ "$tapsetdir" = "$own" ] ||
        fail "tapset in $tapsetdir, but $stap reads $own without -I"
    fi
  fi
fi
if [ -n "$dtracelibdir" ]; then
  [ -s "$dest$dtracelibdir/nbdkit_translators.d" ] ||
    fail "make install did not install $dtracelibdir/nbdkit_translators.d"
fi
[ -s "$dest$prefix/share/nbdkit/probes.d" ] ||
  fail "make install did not install $prefix/share/nbdkit/probes.d"
cmp "$abs_top_srcdir/server/probes.d" "$dest$prefix/share/nbdkit/probes.d" ||
  fail "installed probes.d differs from server/probes.d"
# The installed nbdkit-trace has its version written in (no configure.ac
# beside it to read it from).
v="$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$abs_top_builddir/config.h")"
[ "$("$dest$prefix/bin/nbdkit-trace" --version)" = "nbdkit-trace (nbdkit) $v" ] ||
  fail "the installed nbdkit-trace --version does not print $v"

# The installed tapset elaborates (against the build's server: the
# installed one is under DESTDIR, not at the path the tapset names).
[ -n "$tapsetdir" ] || exit 0
requires_cmd stap
requires_probes
mkdir "$tmpdir/ts"
for f in nbdkit.stp nbdkit_conninfo.stp; do
  sed "s|process(\"$prefix/sbin/nbdkit\")|process(\"$server_binary\")|" \
    "$dest$tapsetdir/$f" > "$tmpdir/ts/$f"
done
stap_r=()
if [ ! -e "/lib/modules/$(uname -r)/build/.config" ]; then
  k="$tmpdir/kernel"
  mkdir -p "$k/include/config"
  uname -r > "$k/include/config/kernel.release"
  printf "CONFIG_%s=y\n" TRACEPOINTS ARCH_SUPPORTS_UPROBES UPROBES > "$k/.config"
  : > "$k/Module.symvers"
  stap_r=(-r "$k")
fi
stap -p2 "${stap_r[@]}" -I "$tmpdir/ts" -e '
probe nbdkit.request.done { printf("%s %s %d\n", cmd, peer, latency_us) }
probe nbdkit.connection.accept, nbdkit.connection.close { println(peer) }
' > "$tmpdir/p2" 2> "$tmpdir/p2.err" || {
  grep -v 'Parse error\|@\|\^' "$tmpdir/p2.err"
  fail "the installed tapset does not elaborate"
}
echo "$0: installed tapset elaborates"
