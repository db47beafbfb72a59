# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the offset filter, included by tests/Makefile.am.
TESTS += test-offset-filter.sh
