# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the gzip filter, included by tests/Makefile.am.
TESTS += test-gzip-filter.sh test-gzip-filter-probes.sh
