# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the ondemand plugin, included by tests/Makefile.am.
TESTS += test-ondemand-plugin.sh test-ondemand-probes.sh \
	test-ondemand-exports.sh test-ondemand-share.sh
