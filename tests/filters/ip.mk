# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ip filter, included by tests/Makefile.am.
TESTS += test-ip-filter.sh test-ip-filter-probes.sh test-ip-filter-tls.sh
