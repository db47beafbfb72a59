# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the pause filter, included by tests/Makefile.am.
TESTS += test-pause-filter.sh test-pause-filter-probes.sh
