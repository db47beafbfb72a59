# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the map filter, included by tests/Makefile.am.
TESTS += test-map-filter.sh test-map-filter-probes.sh
