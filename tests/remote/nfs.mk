# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nfs plugin (libnfs): a file on an NFS server.  Each test
# runs in network and mount namespaces of its own with a private
# nfs-ganesha (tests/nfs-ganesha.sh).
EXTRA_DIST += nfs-ganesha.sh
if HAVE_LIBNFS
TESTS += test-nfs-plugin.sh test-nfs-errors.sh test-nfs-probes.sh
endif
