# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server's probes: in the ELF notes, documented, with semaphores,
# their string arguments, their order, seen by perf and bpftrace, and
# by a tracer that attaches to a running server; and the declarations
# (server/probes.d and each module's probes.d) the tracing tools are
# generated from, against every built .so.
TESTS += test-probes-readelf.sh test-probes-doc.sh \
	test-probes-documented.sh test-probes-semaphore.sh \
	test-probes-strings.sh test-probes-sequence.sh test-probes-perf.sh \
	test-probes-bpftrace.sh test-probes-bpftrace-args.sh \
	test-probes-busy-poll.sh \
	test-probes-reply-send-order.sh test-probes-late-attach.sh \
	test-probes-declared.sh test-probes-stability.sh
