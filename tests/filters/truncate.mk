# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the truncate filter, included by tests/Makefile.am.
TESTS += test-truncate-filter.sh test-truncate-filter-probes.sh
