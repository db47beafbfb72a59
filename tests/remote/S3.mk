# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the S3 plugin (libcurl, SigV4): a disk in an S3 bucket, on
# the radosgw of the Ceph test cluster (requires_ceph).
TESTS += test-S3-plugin.sh test-S3-errors.sh test-S3-credentials.sh \
	test-S3-debian.sh test-S3-qemu-img.sh \
	test-S3-probes.sh test-S3-pool.sh \
	test-S3-sparse.sh test-S3-async.sh test-S3-async-fake.sh \
	test-S3-async-probes.sh test-S3-async-valgrind.sh \
	test-S3-async-write.sh
EXTRA_DIST += S3-helpers.sh
