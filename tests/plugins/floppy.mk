# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the floppy plugin, included by tests/Makefile.am.
TESTS += \
	test-floppy-plugin.sh \
	test-floppy-plugin-params.sh \
	test-floppy-plugin-probes.sh
