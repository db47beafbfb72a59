# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the noparallel filter, included by tests/Makefile.am.
TESTS += test-noparallel-filter.sh
