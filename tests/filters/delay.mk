# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the delay filter, included by tests/Makefile.am.
TESTS += test-delay-filter.sh test-delay-filter-probes.sh
