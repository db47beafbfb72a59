# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part C (stages), included by
# tests/Makefile.am.
