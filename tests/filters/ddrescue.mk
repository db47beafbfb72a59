# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ddrescue filter, included by tests/Makefile.am.
TESTS += test-ddrescue-filter.sh test-ddrescue-filter-probes.sh
