# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the spinning filter, included by tests/Makefile.am.
TESTS += test-spinning-filter.sh test-spinning-filter-probes.sh
