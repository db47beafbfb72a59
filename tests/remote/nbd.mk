# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nbd plugin (libnbd): proxy to another NBD server.
TESTS += test-nbd-plugin.sh test-nbd-commands.sh \
	test-nbd-tls.sh test-nbd-command.sh \
	test-nbd-dynamic-export.sh test-nbd-retry.sh test-nbd-fault.sh \
	test-nbd-errors.sh test-nbd-probes.sh test-nbd-parallel.sh \
	test-nbd-default-export.sh test-nbd-async-bytes.sh \
	test-nbd-async-overlap.sh test-nbd-async-probes.sh \
	test-nbd-async-errors.sh test-nbd-async-upstream-dies.sh \
	test-nbd-async-hangup.sh test-nbd-async-partition.sh
EXTRA_DIST += nbd-plugin-functions.sh
