# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the scan filter, included by tests/Makefile.am.
TESTS += test-scan-filter.sh test-scan-filter-probes.sh
