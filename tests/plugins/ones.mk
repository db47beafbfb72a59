# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ones plugin, included by tests/Makefile.am.
TESTS += test-ones-plugin.sh
