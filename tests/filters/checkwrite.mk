# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the checkwrite filter, included by tests/Makefile.am.
TESTS += test-checkwrite-filter.sh test-checkwrite-filter-probes.sh
