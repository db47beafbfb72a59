# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the limit filter, included by tests/Makefile.am.
TESTS += test-limit-filter.sh test-limit-filter-probes.sh
