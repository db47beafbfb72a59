# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the exitlast filter, included by tests/Makefile.am.
TESTS += test-exitlast-filter.sh test-exitlast-filter-probes.sh
