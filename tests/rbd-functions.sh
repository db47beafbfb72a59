# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/rbd-functions.sh: what the rbd plugin's tests share.  Sourced
# after functions.sh; skips the test when librbd or ceph is missing,
# then joins the Ceph test cluster (requires_ceph) and sets:
#   $rbd_so      the plugin's .so in the build tree
#   $rbd_args    the parameters that reach the cluster as the plugin's
#                client: conf= id= keyring= (and a short timeout=)
# and offers:
#   new_image NAME SIZE   create an image with a name private to this
#                         test (echoed), removed at exit
#   rbdc ARGS...          the rbd tool, bounded in time; name images
#                         as "$RBD_POOL/NAME"

rbd_so="$abs_top_builddir/plugins/rbd/.libs/nbdkit-rbd-plugin.so"
requires test -f "$rbd_so"
requires_ceph

rbd_args=(conf="$CEPH_CONF" id="$CEPH_ID" keyring="$CEPH_KEYRING" timeout=20)

rbdc ()
{
  timeout 60 rbd "$@" 9>&-
}

# Images are named after the test and its pid: tests share the pool.
new_image ()
{
  local name="${0##*/}"
  name="${name%.sh}-$1-$$"
  rbdc create --size "$2" "$RBD_POOL/$name" >&2 || fail "rbd create $name failed"
  cleanup_fn _rbd_remove "$name"
  echo "$name"
}

_rbd_remove ()
{
  rbdc snap purge "$RBD_POOL/$1" >/dev/null 2>&1 || :
  rbdc rm --no-progress "$RBD_POOL/$1" >/dev/null 2>&1 || :
}
