# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the lua plugin host (liblua5.4).
TESTS += test-lua-plugin.sh test-lua-plugin-errors.sh \
	test-lua-plugin-probes.sh test-lua-plugin-memory.sh
EXTRA_DIST += lang/lua.sh
EXTRA_DIST += lang/host-test.sh
