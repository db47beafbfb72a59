# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the example2 plugin, included by tests/Makefile.am.
TESTS += test-example2-plugin.sh
