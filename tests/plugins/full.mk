# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the full plugin, included by tests/Makefile.am.
TESTS += test-full-plugin.sh
