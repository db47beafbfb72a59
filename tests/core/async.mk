# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Asynchronous requests (nbdkit-async(3)), through the example-async
# plugin: bytes, requests in flight on few threads, errors, the end of
# a connection with requests in flight, filters and serialising thread
# models (the synchronous fallback), the submit and complete probes.
TESTS += test-async-write-read.sh test-async-in-flight.sh \
	test-async-errors.sh test-async-disconnect.sh test-async-filter.sh \
	test-async-probes.sh test-async-filters-adjust.sh \
	test-async-server-loop.sh test-async-watch-events.sh \
	test-async-filters-slow.sh test-async-direct.sh
