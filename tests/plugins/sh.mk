# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the sh plugin, included by tests/Makefile.am.
TESTS += test-sh-plugin.sh test-sh-plugin-errors.sh test-sh-plugin-probes.sh
