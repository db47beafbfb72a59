#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's snapshot=: it serves the snapshot's bytes, not the
# image's later ones (the same bytes as "rbd export IMAGE@SNAP"), the
# export is read-only, and a write, trim or zero sent anyway is refused
# with EPERM or EROFS and changes nothing.  A -r server on the image's
# head is read-only too.  Would catch: snap name ignored (serving the
# head), writes reaching the image through a snapshot export, a
# writable flag advertised.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy cmp
source "$srcdir/rbd-functions.sh"

img=$(new_image snap 8M)
head -c 8M /dev/urandom > "$tmpdir/before"
start_server rbd "${rbd_args[@]}" image="$img"
t nbdcopy "$tmpdir/before" "$uri"
stop_server
rbdc snap create "$RBD_POOL/$img@s1" --no-progress ||
  fail "rbd snap create failed"
# The head moves on.
start_server rbd "${rbd_args[@]}" image="$img"
t nbdsh -u "$uri" -c 'h.pwrite(b"after" * 1000, 0); h.trim(4 * 1024 * 1024, 4 * 1024 * 1024); h.flush()'
stop_server

for args in "snapshot=s1" "-r"; do
  if [ "$args" = -r ]; then
    start_server -r rbd "${rbd_args[@]}" image="$img"
  else
    start_server rbd "${rbd_args[@]}" image="$img" "$args"
  fi
  t nbdinfo "$uri" > "$tmpdir/info"
  grep -q 'is_read_only: true' "$tmpdir/info" || fail "$args: not read-only"
  t nbdsh -u "$uri" -c '
h.set_strict_mode(0)
for what, op in (("write", lambda: h.pwrite(b"x" * 512, 0)),
                 ("trim", lambda: h.trim(512, 0)),
                 ("zero", lambda: h.zero(512, 0))):
    try:
        op()
        raise Exception(what + " succeeded on a read-only export")
    except nbd.Error as e:
        assert e.errno in ("EPERM", "EROFS"), what + ": " + str(e.errno)
' || fail "$args: a write was not refused with EPERM/EROFS"
  if [ "$args" = -r ]; then
    t nbdsh -u "$uri" -c 'assert h.pread(5000, 0) == b"after" * 1000' ||
      fail "-r does not serve the head"
  else
    t nbdcopy "$uri" "$tmpdir/snap"
    cmp "$tmpdir/before" "$tmpdir/snap" ||
      fail "snapshot=s1 does not serve the snapshot's bytes"
  fi
  stop_server
done

rbdc export --no-progress "$RBD_POOL/$img@s1" "$tmpdir/exported" ||
  fail "rbd export of the snapshot failed"
cmp "$tmpdir/before" "$tmpdir/exported" ||
  fail "the snapshot changed after the read-only servers"
