# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the random plugin, included by tests/Makefile.am.
TESTS += test-random-plugin.sh
