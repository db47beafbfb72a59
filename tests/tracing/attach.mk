# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part B (attach), included by
# tests/Makefile.am.
TESTS += test-probes-late-attach.sh
