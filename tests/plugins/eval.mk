# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the eval plugin, included by tests/Makefile.am.
TESTS += test-eval-plugin.sh test-eval-plugin-probes.sh
