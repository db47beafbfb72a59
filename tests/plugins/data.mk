# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the data plugin, included by tests/Makefile.am.
TESTS += \
	test-data-plugin.sh \
	test-data-compare.sh \
	test-data-bounds.sh \
	test-data-errors.sh \
	test-data-probes.sh \
	test-data-written-zeroes.sh \
	test-data-ast.sh \
	test-data-base64.sh
