# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the split plugin, included by tests/Makefile.am.
TESTS += test-split-plugin.sh test-split-plugin-probes.sh
