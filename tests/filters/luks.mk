# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the luks filter, included by tests/Makefile.am.
TESTS += test-luks-filter.sh test-luks-filter-ciphers.sh \
	test-luks-filter-probes.sh
