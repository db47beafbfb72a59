# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the swab filter, included by tests/Makefile.am.
TESTS += test-swab-filter.sh
