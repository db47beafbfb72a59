# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the example4 plugin, included by tests/Makefile.am.
TESTS += test-example4-plugin.sh
