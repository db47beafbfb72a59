# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the nozero filter, included by tests/Makefile.am.
TESTS += test-nozero-filter.sh test-nozero-filter-probes.sh
