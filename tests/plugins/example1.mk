# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the example1 plugin, included by tests/Makefile.am.
TESTS += test-example1-plugin.sh
