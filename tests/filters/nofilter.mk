# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nofilter filter, included by tests/Makefile.am.
TESTS += test-nofilter-filter.sh
