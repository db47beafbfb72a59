# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the retry-request filter, included by tests/Makefile.am.
# (flaky-plugin.la, which they load, is built by filters/retry.mk.)
TESTS += test-retry-request-filter.sh test-retry-request-filter-probes.sh
