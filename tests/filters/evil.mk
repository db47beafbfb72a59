# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the evil filter, included by tests/Makefile.am.
TESTS += test-evil-filter.sh test-evil-filter-probes.sh
