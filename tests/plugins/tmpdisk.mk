# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tmpdisk plugin, included by tests/Makefile.am.
TESTS += test-tmpdisk-plugin.sh test-tmpdisk-probes.sh
