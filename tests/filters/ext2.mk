# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ext2 filter, included by tests/Makefile.am.
TESTS += test-ext2-filter.sh test-ext2-filter-exportname.sh \
	test-ext2-filter-probes.sh
