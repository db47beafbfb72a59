#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The systemd units of service/ install where configure said, pass
# systemd-analyze verify, and do what nbdkit-service(1) says: the
# service's ExecStart command line, run by systemd-socket-activate on
# the socket unit's ListenStream (moved into a private directory),
# serves its export to nbdinfo and keeps the data between clients, as an
# unprivileged user without capabilities; and the unit's sandbox rates
# below 4 in systemd-analyze security.
source "$(dirname "$0")/functions.sh"
requires_cmd make nbdinfo nbdsh systemd-socket-activate

unitdir=$(sed -n 's/^systemdsystemunitdir = //p' \
            "$abs_top_builddir/service/Makefile")
[ -n "$unitdir" ] || { echo "configured --with-systemdsystemunitdir=no"; exit 77; }

install_to_destdir
unitdir=${unitdir/\$\{prefix\}/$prefix}
unitdir=${unitdir/\$(prefix)/$prefix}
socket="$dest$unitdir/nbdkit.socket"
service="$dest$unitdir/nbdkit.service"
for f in "$socket" "$service"; do
  [ -f "$f" ] || fail "make install did not install $f"
done
cat "$socket" "$service"

# What the units say.
listen=$(sed -n 's/^ListenStream=//p' "$socket")
execstart=$(sed -n 's/^ExecStart=//p' "$service")
[ "$(echo "$listen" | wc -l)" -eq 1 ] && [ -n "$listen" ] ||
  fail "nbdkit.socket should have one ListenStream, has '$listen'"
[ "$(echo "$execstart" | wc -l)" -eq 1 ] && [ -n "$execstart" ] ||
  fail "nbdkit.service should have one ExecStart, has '$execstart'"
grep -qx 'Requires=nbdkit.socket' "$service" ||
  fail "nbdkit.service does not require nbdkit.socket"
! grep -q '^Accept=yes' "$socket" || fail "nbdkit.socket must not Accept=yes"
case "$listen" in
  /*) ;;
  *) fail "ListenStream '$listen' is not the Unix socket the page documents" ;;
esac
grep -q "ListenStream=$listen" "$abs_top_srcdir/docs/nbdkit-service.pod" ||
  grep -q "F<$listen>" "$abs_top_srcdir/docs/nbdkit-service.pod" ||
  fail "nbdkit-service(1) does not name the socket $listen"
set -- $execstart
server=$1; shift
[ "$server" = "$prefix/sbin/nbdkit" ] ||
  fail "ExecStart runs $server, not the installed $prefix/sbin/nbdkit"
[ -x "$dest$server" ] || fail "ExecStart's $server is not installed"

# systemd-analyze verify, with ExecStart pointing into DESTDIR (verify
# checks that the program exists).  It needs no running systemd.
if command -v systemd-analyze > /dev/null; then
  mkdir "$tmpdir/verify"
  cp "$socket" "$tmpdir/verify/"
  sed "s|^ExecStart=$server|ExecStart=$dest$server|" "$service" \
    > "$tmpdir/verify/nbdkit.service"
  if ! t systemd-analyze verify "$tmpdir/verify/nbdkit.socket" \
         "$tmpdir/verify/nbdkit.service" > "$tmpdir/verify.log" 2>&1; then
    cat "$tmpdir/verify.log"
    fail "systemd-analyze verify failed"
  fi
  cat "$tmpdir/verify.log"
  # Any complaint about our units (unknown keys, bad values) fails too.
  if grep -i 'nbdkit\.\(socket\|service\)' "$tmpdir/verify.log"; then
    fail "systemd-analyze verify complained about the units"
  fi
  # The sandbox: systemd's own rating of the service's exposure (0 is
  # locked down, 10 is none) stays below 4, "OK".
  t systemd-analyze security --offline=yes \
    "$tmpdir/verify/nbdkit.service" > "$tmpdir/security.log" 2>&1 || :
  exposure=$(sed -n 's/.*Overall exposure level for nbdkit.service: \([0-9.]*\).*/\1/p' \
               "$tmpdir/security.log")
  [ -n "$exposure" ] || { cat "$tmpdir/security.log"; fail "no exposure level"; }
  echo "systemd-analyze security: $exposure"
  awk -v e="$exposure" 'BEGIN { exit !(e < 4) }' ||
    { cat "$tmpdir/security.log"; fail "exposure $exposure is not below 4"; }
else
  echo "systemd-analyze missing: verify step skipped"
fi
for d in DynamicUser=yes ProtectSystem=strict ProtectHome=yes \
         NoNewPrivileges=yes CapabilityBoundingSet= ; do
  grep -qx "$d" "$service" || fail "nbdkit.service lacks $d"
done

# The service's command line under socket activation, on the socket's
# path moved into $tmpdir.  The installed server finds the installed
# plugins through NBDKIT_PLUGINDIR (its compiled-in directory is not
# under DESTDIR).
sock="$tmpdir/${listen##*/}"
# (systemd-socket-activate passes on only the variables given with -E.)
# No systemd runs as PID 1 here to apply the sandbox, so the server runs
# the way it would under it as far as this machine can: as an
# unprivileged user of its own (DynamicUser), with no capabilities and
# no way to gain any (NoNewPrivileges, CapabilityBoundingSet=).
chmod 755 "$tmpdir"
systemd-socket-activate -l "$sock" \
  -E NBDKIT_PLUGINDIR="$dest$libdir/nbdkit/plugins" \
  setpriv --reuid=61234 --regid=61234 --clear-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all "$dest$server" "$@" \
  > "$tmpdir/server.log" 2>&1 &
pid=$!
cleanup_fn _kill_pid "$pid"
wait_for 10 -S "$sock" || fail "systemd-socket-activate did not listen"
uri="nbd+unix:///?socket=$sock"
size=$(t nbdinfo --size "$uri")
[ "$size" = 1073741824 ] || fail "the service served size '$size'"
t nbdsh -u "$uri" -c 'h.pwrite(b"service", 4096)'
t nbdsh -u "$uri" -c 'assert h.pread(7, 4096) == b"service"'
# One server took both clients: socket activation, not one per client.
[ "$(pgrep -c -P "$pid" || :)" -eq 0 ] ||
  fail "the server forked children: expected the activated server itself"
kill -0 "$pid" || fail "the activated server exited after its clients"
# ... and it was the unprivileged one.
spid=$(pgrep -f "^$dest$server" | head -1)
[ -n "$spid" ] && [ "$(stat -c %u /proc/$spid)" = 61234 ] ||
  fail "the server did not run as the unprivileged uid"
grep -q '^CapEff:[[:space:]]*0*$' /proc/$spid/status ||
  fail "the server has capabilities"
cat "$tmpdir/server.log"
