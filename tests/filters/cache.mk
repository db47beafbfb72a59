# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cache filter, included by tests/Makefile.am.
TESTS += test-cache-filter.sh
TESTS += test-cache-filter-probes.sh
TESTS += test-cache-filter-parallel.sh
TESTS += test-cache-miss-join.sh
