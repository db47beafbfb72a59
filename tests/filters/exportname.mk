# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the exportname filter, included by tests/Makefile.am.
TESTS += test-exportname-filter.sh test-exportname-filter-probes.sh \
	test-exportname-filter-default-empty.sh
