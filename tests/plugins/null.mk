# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the null plugin, included by tests/Makefile.am.
TESTS += test-null.sh
