# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the sh plugin, included by tests/Makefile.am.
TESTS += test-sh-plugin.sh test-sh-plugin-errors.sh test-sh-plugin-probes.sh \
	test-sh-plugin-exit-codes.sh \
	test-sh-plugin-errno-names.sh test-sh-plugin-output-newline.sh \
	test-sh-plugin-run-env.sh test-sh-plugin-dump-thread-model.sh
