# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the error filter, included by tests/Makefile.am.
TESTS += test-error-filter.sh test-error-filter-probes.sh \
	test-error-filter-parallel.sh
TESTS += test-filters-fault-stress.sh
