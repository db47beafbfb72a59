# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the readahead filter, included by tests/Makefile.am.
TESTS += test-readahead-filter.sh test-readahead-filter-probes.sh
