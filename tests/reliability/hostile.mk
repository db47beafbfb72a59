# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Reliability suite: the project's hostile client
# (hostile-client.py) against filter stacks, not only the memory
# plugin.  Included by tests/Makefile.am.
TESTS += reliability/test-hostile-stack-cow-cache-partition.sh \
	reliability/test-hostile-stack-blocksize.sh \
	reliability/test-hostile-stack-retry-nbd.sh
EXTRA_DIST += reliability/hostile-stacks.sh
