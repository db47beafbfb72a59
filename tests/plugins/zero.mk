# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the zero plugin, included by tests/Makefile.am.
TESTS += test-zero-plugin.sh
