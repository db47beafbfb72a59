# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the readonly filter, included by tests/Makefile.am.
TESTS += test-readonly-filter.sh test-readonly-filter-probes.sh
