# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the rbd plugin (librbd): a Ceph RBD image.  They share the
# one-node cluster of ceph-cluster.sh (requires_ceph in functions.sh),
# but for those that stop its OSD (osd-fault, async-stall), which start
# a private one (rbd-private-cluster.sh).  test-rbd-async*.sh hold the asynchronous path
# (nbdkit-async(3)) to the synchronous one.
TESTS += \
	test-rbd-plugin.sh \
	test-rbd-errors.sh \
	test-rbd-zero-trim.sh \
	test-rbd-snapshot.sh \
	test-rbd-exports.sh \
	test-rbd-probes.sh \
	test-rbd-osd-fault.sh \
	test-rbd-two-servers.sh \
	test-rbd-async.sh \
	test-rbd-async-errors.sh \
	test-rbd-async-overlap.sh \
	test-rbd-async-stall.sh
EXTRA_DIST += ceph-cluster.sh rbd-functions.sh rbd-private-cluster.sh
