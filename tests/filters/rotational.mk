# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the rotational filter, included by tests/Makefile.am.
TESTS += test-rotational-filter.sh test-rotational-filter-probes.sh
