# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tls-fallback filter, included by tests/Makefile.am.
TESTS += test-tls-fallback-filter.sh test-tls-fallback-filter-probes.sh
