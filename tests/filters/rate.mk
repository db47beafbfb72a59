# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the rate filter, included by tests/Makefile.am.
TESTS += test-rate-filter.sh test-rate-filter-probes.sh
