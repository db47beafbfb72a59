# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the retry filter, included by tests/Makefile.am.
TESTS += test-retry-filter.sh test-retry-filter-probes.sh \
	test-retry-probes-request.sh

# flaky-plugin.la, which they load, is among the helpers in
# tests/Makefile.am.
