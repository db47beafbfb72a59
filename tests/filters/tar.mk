# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tar filter, included by tests/Makefile.am.
TESTS += test-tar-filter.sh test-tar-filter-probes.sh
