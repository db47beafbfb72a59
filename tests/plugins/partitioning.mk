# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the partitioning plugin, included by tests/Makefile.am.
TESTS += test-partitioning-plugin.sh
