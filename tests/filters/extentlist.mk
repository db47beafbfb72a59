# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the extentlist filter, included by tests/Makefile.am.
TESTS += test-extentlist-filter.sh
