# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the noextents filter, included by tests/Makefile.am.
TESTS += test-noextents-filter.sh
