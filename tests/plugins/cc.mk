# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the cc plugin, included by tests/Makefile.am.
TESTS += test-cc-plugin.sh test-cc-plugin-errors.sh test-cc-plugin-probes.sh
