# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part D (translators), included by
# tests/Makefile.am.
TESTS += test-tool-install-tracing.sh
