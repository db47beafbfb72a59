# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the log filter, included by tests/Makefile.am.
TESTS += test-log-filter.sh
