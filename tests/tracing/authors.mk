# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part F (authors), included by
# tests/Makefile.am.
TESTS += test-example-probes-join.sh
TESTS += test-example-filter-probes.sh
TESTS += test-example-out-of-tree.sh
TESTS += test-example-provider.sh
TESTS += test-sh-plugin-user-probe.sh
TESTS += test-eval-plugin-user-probe.sh
TESTS += test-tool-user.sh
