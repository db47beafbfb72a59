# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The tracing tools in tools/ (nbdkit-top, nbdkit-latency, ...), each
# run against a captive server.
TESTS += test-tool-top.sh test-tool-top-multi.sh test-tool-top-metrics.sh \
	test-tool-trace-metrics.sh \
	test-tool-latency.sh \
	test-tool-slow.sh \
	test-tool-snoop.sh test-tool-handshake.sh test-tool-connections.sh \
	test-tool-stp.sh test-tool-dtrace.sh test-tool-filters.sh \
	test-tool-top-tmux.sh test-tool-perf-events.sh \
	test-tool-heatmap.sh test-tool-folded.sh \
	test-tool-install-tracing.sh
