# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part E (top), included by
# tests/Makefile.am.
TESTS += test-tool-top-tmux.sh
