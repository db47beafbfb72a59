# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the lzip filter, included by tests/Makefile.am.
TESTS += test-lzip-filter.sh test-lzip-filter-probes.sh
