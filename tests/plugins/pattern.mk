# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the pattern plugin, included by tests/Makefile.am.
TESTS += test-pattern-plugin.sh
