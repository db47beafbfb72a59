# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the time-limit filter, included by tests/Makefile.am.
TESTS += test-time-limit-filter.sh test-time-limit-filter-probes.sh
