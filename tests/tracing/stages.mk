# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The stage probes: each request's trip through the worker, the
# layers and TLS, with the config and big reads that shape it.
TESTS += test-probes-stages-requests.sh test-probes-stages-workers.sh \
	test-probes-stages-config.sh test-probes-stages-origin.sh \
	test-probes-stages-tls.sh test-probes-stages-bigreads.sh

# Locks a request waited for (wait_start, wait_done).
TESTS += test-wait-probes.sh
