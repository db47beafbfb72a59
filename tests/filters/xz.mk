# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the xz filter, included by tests/Makefile.am.
TESTS += test-xz-filter.sh test-xz-filter-corrupt.sh test-xz-filter-probes.sh
