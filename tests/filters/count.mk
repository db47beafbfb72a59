# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the count filter, included by tests/Makefile.am.
TESTS += test-count-filter.sh test-count-filter-probes.sh
