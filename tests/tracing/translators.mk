# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part D (translators) and of the
# probe declarations the tracing tools are generated from, included by
# tests/Makefile.am.
TESTS += test-tool-install-tracing.sh
TESTS += test-probes-declared.sh
