# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the bzip2 filter, included by tests/Makefile.am.
TESTS += test-bzip2-filter.sh test-bzip2-filter-probes.sh
EXTRA_DIST += compress-filters.sh
