# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Tests of the tracing second pass, part C (stages), included by
# tests/Makefile.am.
TESTS += \
	test-probes-stages-requests.sh \
	test-probes-stages-workers.sh \
	test-probes-stages-config.sh \
	test-probes-stages-operands.sh
