# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/rbd-private-cluster.sh: what the rbd plugin's tests that stop
# the OSD share (the shared cluster of rbd-functions.sh must not lose
# its only OSD under other tests).  Sourced after functions.sh with
# $img set to an image name; skips when ceph or the plugin is missing,
# starts a private one-node cluster (ceph-cluster.sh), stopped at exit,
# and sets:
#   $rbd_so      the plugin's .so in the build tree
#   $osd         the OSD's pid (sent SIGCONT at exit, so a frozen OSD
#                can be stopped)
#   $tmpdir/src  24 MiB of random bytes, imported as the image $img
#   $args        the plugin's parameters for $img: conf= id= keyring=
#                timeout=3 image=
requires_cmd ceph-mon ceph-mgr ceph-osd radosgw ceph rbd
rbd_so="$abs_top_builddir/plugins/rbd/.libs/nbdkit-rbd-plugin.so"
requires test -f "$rbd_so"

_cluster="$tmpdir/ceph"
cleanup_fn "$abs_top_srcdir/tests/ceph-cluster.sh" stop "$_cluster"
"$abs_top_srcdir/tests/ceph-cluster.sh" start "$_cluster" --owner $$ 9>&- ||
  fail "the private Ceph cluster did not start"
# shellcheck disable=SC1091
. "$_cluster/env"
osd=$(awk '$1 == "osd.0" { print $2 }' "$_cluster/pids")
cleanup_fn kill -CONT "$osd"
head -c 24M /dev/urandom > "$tmpdir/src"
timeout 60 rbd import --no-progress "$tmpdir/src" "$RBD_POOL/$img" 9>&- ||
  fail "rbd import failed"
args=(conf="$CEPH_CONF" id="$CEPH_ID" keyring="$CEPH_KEYRING" timeout=3
      image="$img")
