# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cacheextents filter, included by tests/Makefile.am.
TESTS += test-cacheextents-filter.sh test-cacheextents-filter-probes.sh
