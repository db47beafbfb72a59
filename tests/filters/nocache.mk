# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nocache filter, included by tests/Makefile.am.
TESTS += test-nocache-filter.sh test-nocache-filter-probes.sh
