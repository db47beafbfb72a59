# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the exitwhen filter, included by tests/Makefile.am.
TESTS += test-exitwhen-filter.sh test-exitwhen-filter-probes.sh
