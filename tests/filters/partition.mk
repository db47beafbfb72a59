# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the partition filter, included by tests/Makefile.am.
TESTS += test-partition-filter.sh test-partition-filter-hostile.sh \
	test-partition-filter-errors.sh
