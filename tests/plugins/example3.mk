# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the example3 plugin, included by tests/Makefile.am.
TESTS += test-example3-plugin.sh
