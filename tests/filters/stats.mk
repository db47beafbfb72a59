# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the stats filter, included by tests/Makefile.am.
TESTS += test-stats-filter.sh
