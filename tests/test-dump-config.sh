#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --dump-config prints key=value lines: every key Debian's nbdkit 1.32
# prints, with this build's values (version 1.32.x, so callers that
# gate on version_major/version_minor work), plus the keys naming this
# server; the version agrees with --version; binary= names the running
# server.
source "$(dirname "$0")/functions.sh"

t "$NBDKIT" --dump-config > "$tmpdir/config"
cat "$tmpdir/config"
if grep -Ev '^[a-z_0-9]+=' "$tmpdir/config"; then
  fail "a line is not key=value"
fi
val () { sed -n "s/^$1=//p" "$tmpdir/config"; }
[ "$(val version)" = 1.46.2 ] || fail "version= is not 1.46.2"
[ "$(val version_major)" = 1 ] || fail "version_major= is not 1"
[ "$(val version_minor)" = 46 ] || fail "version_minor= is not 46"
[ "$(val server)" = nbdkit-usdt ] || fail "no server=nbdkit-usdt"
[ "$(val server_version)" = 0.2.0 ] || fail "no server_version=0.2.0"
[ "$(val name)" = nbdkit ] || fail "name= is not nbdkit"
case "$(val plugindir)" in /*) ;; *) fail "no plugindir=" ;; esac
case "$(val filterdir)" in /*) ;; *) fail "no filterdir=" ;; esac
[ "$(val host_cpu)" = "$(uname -m)" ] || fail "host_cpu= is not $(uname -m)"
for k in exit_with_parent selinux tls zstd probes; do
  case "$(val $k)" in yes|no) ;; *) fail "$k= is not yes or no" ;; esac
done
# Honest answers: this build links neither libselinux nor, unless
# configure found it, libzstd.
[ "$(val selinux)" = no ] || fail "selinux= claims support we lack"
if grep -Eq '^#define HAVE_(LIB)?ZSTD 1' "$abs_top_builddir/config.h"; then
  [ "$(val zstd)" = yes ] || fail "zstd= says no in a zstd build"
else
  [ "$(val zstd)" = no ] || fail "zstd= says yes without libzstd"
fi

# The same keys as Debian's nbdkit, and only ours besides.
/usr/bin/nbdkit --dump-config | cut -d= -f1 | sort > "$tmpdir/debian.keys"
cut -d= -f1 "$tmpdir/config" | sort > "$tmpdir/our.keys"
missing="$(comm -23 "$tmpdir/debian.keys" "$tmpdir/our.keys")"
[ -z "$missing" ] || fail "keys Debian's nbdkit has and we lack: $missing"
extra="$(comm -13 "$tmpdir/debian.keys" "$tmpdir/our.keys" | tr '\n' ' ')"
[ "$extra" = "probes server server_version " ] ||
  fail "unexpected extra keys: $extra"

t "$NBDKIT" --version | grep -qx "nbdkit $(val version)" ||
  fail "--version does not print $(val version)"

# binary= is the server that is running, not the configured sbindir:
# from the build tree the build tree's binary, and a copy moved
# elsewhere names itself.
[ "$(val binary)" = "$(realpath "$abs_top_builddir/server/nbdkit")" ] ||
  fail "binary= is $(val binary), not the build tree's server/nbdkit"
cp "$abs_top_builddir/server/nbdkit" "$tmpdir/moved-nbdkit"
[ "$("$tmpdir/moved-nbdkit" --dump-config | sed -n 's/^binary=//p')" = \
  "$(realpath "$tmpdir/moved-nbdkit")" ] ||
  fail "a moved server does not name itself in binary="
