#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The rbd plugin's start-up errors: a pool or image that does not exist,
# a missing snapshot, a wrong key, an unknown client, a missing
# configuration file and a cluster that does not answer each make the
# server print one line naming the plugin and the problem and exit 1,
# within the time timeout= allows, before it serves anyone.  Would
# catch: an error found only at the first client, librados's own
# messages spilling onto stderr, a hang on a dead monitor, exit 0.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo
source "$srcdir/rbd-functions.sh"

img=$(new_image err 4M)

# expect_error WANT ARGS...: the server fails within 30 s with exit 1
# and exactly one line on stderr, which matches the extended regex WANT.
expect_error ()
{
  local want=$1 st=0
  shift
  timeout 30 "$NBDKIT" -U - rbd "$@" --run 'nbdinfo "$uri"' \
    > "$tmpdir/out" 2> "$tmpdir/err" 9>&- || st=$?
  cat "$tmpdir/err"
  [ $st -eq 1 ] || fail "$*: exit status $st, want 1"
  [ "$(wc -l < "$tmpdir/err")" -eq 1 ] ||
    fail "$*: want one line on stderr, got $(wc -l < "$tmpdir/err")"
  grep -Eq "^nbdkit: rbd: error: .*$want" "$tmpdir/err" ||
    fail "$*: the message does not say '$want'"
  [ ! -s "$tmpdir/out" ] || fail "$*: the client ran"
}

short=(conf="$CEPH_CONF" id="$CEPH_ID" keyring="$CEPH_KEYRING" timeout=3)

expect_error "pool=nosuchpool: no such pool" \
  "${short[@]}" pool=nosuchpool image="$img"
expect_error "image 'nosuchimage' not found in pool '$RBD_POOL'" \
  "${short[@]}" image=nosuchimage
expect_error "snapshot 'nosnap' not found" \
  "${short[@]}" image="$img" snapshot=nosnap
expect_error "snapshot=s needs image=" "${short[@]}" snapshot=s
expect_error "conf=$tmpdir/none.conf: cannot read" \
  conf="$tmpdir/none.conf" image="$img"
expect_error "unknown parameter 'color'" "${short[@]}" image="$img" color=red

# The right client with a wrong key, and a client the cluster does not
# know: refused, said as such.
printf '[client.%s]\n\tkey = AQBJp+5m6FJ4CBAAt6fl3kdI8cM9iS3RAAAAAA==\n' \
  "$CEPH_ID" > "$tmpdir/bad.keyring"
expect_error "cannot connect to the Ceph cluster .*id=$CEPH_ID.*Permission denied" \
  conf="$CEPH_CONF" id="$CEPH_ID" keyring="$tmpdir/bad.keyring" \
  timeout=3 image="$img"
expect_error "cannot connect to the Ceph cluster .*id=nobody.*" \
  conf="$CEPH_CONF" id=nobody keyring="$CEPH_KEYRING" timeout=3 image="$img"

# No monitor listens: bounded by timeout=, not librados's 300 s.
port=$(free_port)
sed "s/^mon host = .*/mon host = [v2:127.0.0.1:$port]/" "$CEPH_CONF" \
  > "$tmpdir/dead.conf"
SECONDS=0
expect_error "cannot connect to the Ceph cluster" \
  conf="$tmpdir/dead.conf" keyring="$CEPH_KEYRING" timeout=3 image="$img"
[ $SECONDS -le 15 ] || fail "a dead monitor took ${SECONDS}s to report"
