# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the protect filter, included by tests/Makefile.am.
TESTS += test-protect-filter.sh test-protect-filter-probes.sh
