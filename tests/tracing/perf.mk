# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part A (perf), included by
# tests/Makefile.am.
TESTS += test-tool-perf-events.sh
