# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the info plugin, included by tests/Makefile.am.
TESTS += test-info-plugin.sh
