# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the fua filter, included by tests/Makefile.am.
TESTS += test-fua-filter.sh test-fua-filter-probes.sh test-fua-flush-on-close.sh
