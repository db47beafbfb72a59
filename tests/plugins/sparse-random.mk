# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the sparse-random plugin, included by tests/Makefile.am.
TESTS += test-sparse-random-plugin.sh
