# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the iso plugin, included by tests/Makefile.am.
TESTS += test-iso-plugin.sh test-iso-probes.sh
