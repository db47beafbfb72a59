# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the multi-conn filter, included by tests/Makefile.am.
TESTS += test-multi-conn-filter.sh test-multi-conn-filter-probes.sh
