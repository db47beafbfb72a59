# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the openonce filter, included by tests/Makefile.am.
TESTS += test-openonce-filter.sh test-openonce-filter-probes.sh
