# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the indexed-gzip filter, included by tests/Makefile.am.
TESTS += test-indexed-gzip-filter.sh test-indexed-gzip-filter-probes.sh
