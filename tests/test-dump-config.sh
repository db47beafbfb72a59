#!/usr/bin/env bash
# --dump-config prints key=value lines including version= and plugindir=;
# the version agrees with --version.
source "$(dirname "$0")/functions.sh"

t "$NBDKIT" --dump-config > "$tmpdir/config"
cat "$tmpdir/config"
grep -Eq '^version=[0-9]+\.[0-9]+\.[0-9]+' "$tmpdir/config" || fail "no version="
grep -Eq '^plugindir=/' "$tmpdir/config" || fail "no plugindir="
grep -Eq '^filterdir=/' "$tmpdir/config" || fail "no filterdir="
if grep -Ev '^[a-z_0-9]+=' "$tmpdir/config"; then
  fail "a line is not key=value"
fi
version="$(sed -n 's/^version=//p' "$tmpdir/config")"
t "$NBDKIT" --version | grep -F "$version" ||
  fail "--version does not print $version"
